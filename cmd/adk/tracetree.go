package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
)

// maxTreeEvents bounds what --format tree reads: the pages of a selection
// are walked until this many events, then the tree says it is cut.
const maxTreeEvents = 20000

// queryAll walks a selection's pages from the start of the window.
func queryAll(ctx context.Context, nc *nats.Conn, req tracenode.QueryRequest, max int) ([]json.RawMessage, bool, error) {
	var out []json.RawMessage
	for {
		reply, err := tracenode.Query(ctx, nc, req)
		if err != nil {
			return nil, false, err
		}
		out = append(out, reply.Page.Events...)
		if !reply.Page.Truncated || len(reply.Page.Events) == 0 {
			return out, false, nil
		}
		if len(out) >= max {
			return out, true, nil
		}
		c := reply.Page.NextCursor
		req.AfterCursor = &c
	}
}

// treeSpan is one span of the tree: its end signal when it ended, else its
// start signal.
type treeSpan struct {
	TraceID  string         `json:"trace_id"`
	SpanID   string         `json:"span_id"`
	Parent   string         `json:"parent_span_id"`
	Name     string         `json:"name"`
	Phase    string         `json:"phase"`
	Status   string         `json:"status"`
	StartNS  int64          `json:"start_time_unix_nano"`
	Duration *int64         `json:"duration_nano"`
	Attrs    map[string]any `json:"attributes"`
	children []*treeSpan
}

// treeAttrs are the attributes the tree shows, in this order.
var treeAttrs = []string{
	"service.name",
	"adk.eval.case_id", "adk.eval.sample_id", "adk.eval.worker_id",
	"gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model", "gen_ai.tool.name",
	"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons", "error.type",
}

// printTree prints the v2 spans among events as indented waterfalls, one
// per trace: offset from the trace's start, duration, name, status and the
// gen-ai attributes. Envelopes and lifecycle records are not spans and are
// left out (json and table show them).
func printTree(w io.Writer, events []json.RawMessage, truncated bool) error {
	spans := map[string]*treeSpan{}
	var order []string
	for _, raw := range events {
		var rec struct {
			Kind  string          `json:"kind"`
			Event json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			return err
		}
		var sp treeSpan
		if rec.Kind != tracestore.KindObservability || json.Unmarshal(rec.Event, &sp) != nil || sp.SpanID == "" || sp.Phase == "" {
			continue
		}
		key := sp.TraceID + "/" + sp.SpanID
		if old, ok := spans[key]; ok {
			if old.Phase == "end" {
				continue
			}
			*old = sp
			continue
		}
		s := sp
		spans[key] = &s
		order = append(order, key)
	}
	roots := map[string][]*treeSpan{}
	var traces []string
	for _, key := range order {
		s := spans[key]
		if p, ok := spans[s.TraceID+"/"+s.Parent]; ok && s.Parent != "" {
			p.children = append(p.children, s)
			continue
		}
		if _, ok := roots[s.TraceID]; !ok {
			traces = append(traces, s.TraceID)
		}
		roots[s.TraceID] = append(roots[s.TraceID], s)
	}
	if len(traces) == 0 {
		_, err := fmt.Fprintln(w, "# no spans")
		return err
	}
	for _, tid := range traces {
		rs := roots[tid]
		byStart(rs)
		t0 := rs[0].StartNS
		if _, err := fmt.Fprintf(w, "trace %s\n", tid); err != nil {
			return err
		}
		for _, r := range rs {
			if err := printTreeSpan(w, r, t0, 1); err != nil {
				return err
			}
		}
	}
	if truncated {
		_, err := fmt.Fprintf(w, "# cut at %d events: narrow the selection (--case, --sample)\n", maxTreeEvents)
		return err
	}
	return nil
}

func byStart(s []*treeSpan) {
	sort.SliceStable(s, func(i, j int) bool { return s[i].StartNS < s[j].StartNS })
}

func printTreeSpan(w io.Writer, s *treeSpan, t0 int64, depth int) error {
	dur := "running"
	if s.Duration != nil {
		dur = fmtDur(time.Duration(*s.Duration))
	}
	var attrs []string
	for _, k := range treeAttrs {
		if v, ok := s.Attrs[k]; ok {
			attrs = append(attrs, fmt.Sprintf("%s=%v", k, v))
		}
	}
	status := s.Status
	if status == "" {
		status = "-"
	}
	if _, err := fmt.Fprintf(w, "%s+%-9s %-9s %-22s %-5s %s\n", strings.Repeat("  ", depth),
		fmtDur(time.Duration(s.StartNS-t0)), dur, s.Name, status, strings.Join(attrs, " ")); err != nil {
		return err
	}
	byStart(s.children)
	for _, c := range s.children {
		if err := printTreeSpan(w, c, t0, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// fmtDur rounds a duration for reading: µs below a millisecond, else ms
// with one decimal below a second, else seconds with three.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.3fs", d.Seconds())
}
