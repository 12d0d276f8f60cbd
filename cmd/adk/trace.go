package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/spf13/cobra"
)

// traceTokenEnv names the environment variable holding the bearer token.
const traceTokenEnv = "ADK_TRACE_TOKEN"

type traceFlags struct {
	nats         natsFlags
	token        string
	runID        string
	traceID      string
	workflowID   string
	invocationID string
	jobID        string
	caseID       string
	sampleID     string
	after        uint64
	limit        int
	format       string
	timeout      time.Duration
	interval     time.Duration
}

func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "trace", Short: "Query and follow stored traces on any store node"}
	cmd.AddCommand(newTraceQueryCmd(), newTraceTailCmd())
	return cmd
}

func addTraceFlags(cmd *cobra.Command, f *traceFlags) {
	f.nats.register(cmd.Flags(), defaultNATSURL)
	cmd.Flags().StringVar(&f.token, "token", "", "bearer token (default $"+traceTokenEnv+")")
	cmd.Flags().StringVar(&f.runID, "run-id", "", "select by run_id")
	cmd.Flags().StringVar(&f.traceID, "trace-id", "", "select by trace_id")
	cmd.Flags().StringVar(&f.workflowID, "workflow-id", "", "select by workflow_id")
	cmd.Flags().StringVar(&f.invocationID, "invocation-id", "", "select by invocation_id")
	cmd.Flags().StringVar(&f.jobID, "job", "", "select an eval job's spans by its job id")
	cmd.Flags().StringVar(&f.caseID, "case", "", "with --job: select one case of the job")
	cmd.Flags().StringVar(&f.sampleID, "sample", "", "with --job and --case: select one sample of the case")
	cmd.Flags().IntVar(&f.limit, "limit", 0, "events per page (default: the store's max_query_events)")
	cmd.Flags().StringVar(&f.format, "format", "json", "output format: json|table|tree (tree: query only)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Second, "request timeout")
}

func (f *traceFlags) request(after *uint64) (tracenode.QueryRequest, error) {
	tok := f.token
	if tok == "" {
		tok = os.Getenv(traceTokenEnv)
	}
	if tok == "" {
		return tracenode.QueryRequest{}, usageError{errors.New("a bearer token is required (--token or $" + traceTokenEnv + ")")}
	}
	if f.format != "json" && f.format != "table" && f.format != "tree" {
		return tracenode.QueryRequest{}, usageError{fmt.Errorf("--format is one of json, table, tree; got %q", f.format)}
	}
	sel := map[string]string{}
	for k, v := range map[string]string{"run_id": f.runID, "trace_id": f.traceID, "workflow_id": f.workflowID, "invocation_id": f.invocationID} {
		if v != "" {
			sel[k] = v
		}
	}
	switch {
	case f.caseID != "" && f.jobID == "":
		return tracenode.QueryRequest{}, usageError{errors.New("--case needs --job")}
	case f.sampleID != "" && f.caseID == "":
		return tracenode.QueryRequest{}, usageError{errors.New("--sample needs --job and --case")}
	case f.jobID != "" && len(sel) > 0:
		return tracenode.QueryRequest{}, usageError{errors.New("--job, --case and --sample do not combine with --run-id, --trace-id, --workflow-id or --invocation-id")}
	}
	for k, v := range map[string]string{"job_id": f.jobID, "case_id": f.caseID, "sample_id": f.sampleID} {
		if v != "" {
			sel[k] = v
		}
	}
	return tracenode.QueryRequest{Token: tok, Selector: sel, AfterCursor: after, Limit: f.limit}, nil
}

func newTraceQueryCmd() *cobra.Command {
	var f traceFlags
	cmd := &cobra.Command{
		Use:   "query",
		Short: "Print one page of the caller's stored events",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var after *uint64
			if cmd.Flags().Changed("after") {
				after = &f.after
			}
			req, err := f.request(after)
			if err != nil {
				return err
			}
			nc, err := f.nats.dial(bus.WithMaxReconnects(0))
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
			defer cancel()
			if f.format == "tree" {
				events, truncated, err := queryAll(ctx, nc, req, maxTreeEvents)
				if err != nil {
					return traceError(err)
				}
				return printTree(cmd.OutOrStdout(), events, truncated)
			}
			reply, err := tracenode.Query(ctx, nc, req)
			if err != nil {
				return traceError(err)
			}
			return printPage(cmd.OutOrStdout(), reply.Page, f.format, true)
		},
	}
	addTraceFlags(cmd, &f)
	cmd.Flags().Uint64Var(&f.after, "after", 0, "return events after this cursor (explicit: a replay gap is an error)")
	return cmd
}

func newTraceTailCmd() *cobra.Command {
	var f traceFlags
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow new events as store nodes apply them (Ctrl-C stops)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := f.request(nil); err != nil {
				return err
			}
			if f.format == "tree" {
				return usageError{errors.New("--format tree is for trace query; tail prints json or table")}
			}
			nc, err := f.nats.dial()
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return tail(ctx, cmd.OutOrStdout(), &f, func(ctx context.Context, req tracenode.QueryRequest) (*tracenode.QueryReply, error) {
				qctx, cancel := context.WithTimeout(ctx, f.timeout)
				defer cancel()
				return tracenode.Query(qctx, nc, req)
			})
		},
	}
	addTraceFlags(cmd, &f)
	cmd.Flags().DurationVar(&f.interval, "interval", 500*time.Millisecond, "poll interval when caught up")
	return cmd
}

// tail prints every new event: the current window first, then each page
// after the last cursor printed, polling when caught up. A replay gap
// (events evicted before they were printed) is reported and skipped.
func tail(ctx context.Context, w io.Writer, f *traceFlags, query func(context.Context, tracenode.QueryRequest) (*tracenode.QueryReply, error)) error {
	var after *uint64
	for {
		req, err := f.request(after)
		if err != nil {
			return err
		}
		reply, err := query(ctx, req)
		var se *tracestore.Error
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &se) && se.Code == tracestore.CodeReplayGap && se.Fields.Gap != nil:
			fmt.Fprintf(w, "# replay gap: events up to cursor %d were evicted before they were read\n", se.Fields.Gap.EvictedThrough)
			c := se.Fields.Gap.EvictedThrough
			after = &c
			continue
		case err != nil:
			return traceError(err)
		}
		if err := printPage(w, reply.Page, f.format, false); err != nil {
			return err
		}
		c := reply.Page.NextCursor
		after = &c
		if reply.Page.Truncated {
			continue
		}
		t := time.NewTimer(f.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func traceError(err error) error {
	var se *tracestore.Error
	if errors.As(err, &se) && se.Fields.Gap != nil {
		oldest := "null"
		if se.Fields.Gap.OldestAvailableCursor != nil {
			oldest = fmt.Sprint(*se.Fields.Gap.OldestAvailableCursor)
		}
		return fmt.Errorf("%s: after_cursor %d, oldest_available_cursor %s, latest_cursor %d, evicted_through %d",
			se.Code, se.Fields.Gap.AfterCursor, oldest, se.Fields.Gap.LatestCursor, se.Fields.Gap.EvictedThrough)
	}
	return err
}

// printPage writes a page as the contract's JSON document (whole=true) or
// one JSON event per line (tail), or as a table.
func printPage(w io.Writer, p *tracestore.Page, format string, whole bool) error {
	if format == "table" {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if whole {
			fmt.Fprintln(tw, "CURSOR\tKIND\tTIMESTAMP_MS\tIDENTITY\tNAME")
		}
		for _, raw := range p.Events {
			var e struct {
				Cursor   uint64            `json:"cursor"`
				Kind     string            `json:"kind"`
				TS       int64             `json:"timestamp_ms"`
				Identity map[string]string `json:"identity"`
				Event    map[string]any    `json:"event"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				return err
			}
			ids := make([]string, 0, len(e.Identity))
			for k, v := range e.Identity {
				ids = append(ids, k+"="+v)
			}
			sort.Strings(ids)
			name := ""
			for _, k := range []string{"name", "event", "type"} {
				if s, ok := e.Event[k].(string); ok {
					name = s
					break
				}
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", e.Cursor, e.Kind, e.TS, strings.Join(ids, ","), name)
		}
		if whole {
			fmt.Fprintf(tw, "# next_cursor %d, latest_cursor %d, truncated %v\n", p.NextCursor, p.LatestCursor, p.Truncated)
		}
		return tw.Flush()
	}
	if !whole {
		for _, e := range p.Events {
			if _, err := fmt.Fprintf(w, "%s\n", e); err != nil {
				return err
			}
		}
		return nil
	}
	doc := struct {
		*tracestore.Page
		SchemaVersion   int  `json:"schema_version"`
		ContentCaptured bool `json:"content_captured"`
	}{p, 1, false}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
