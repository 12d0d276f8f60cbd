package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/settings"
)

// watchLines decodes the JSON log lines written so far.
func watchLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestSignalWatch_RateLimitsWarnings steps the watch through given
// counters and times: the first loss is logged at once, later losses at
// most once per interval with the count since the previous line and each
// reason, a delivery after a warning once, and losses held back by the
// interval are logged when it has passed even if nothing new is lost.
func TestSignalWatch_RateLimitsWarnings(t *testing.T) {
	var buf testutil.Buffer
	w := newSignalWatch(slog.New(slog.NewJSONHandler(&buf, nil)), settings.Defaults().Log.SignalWarnInterval.D(), "adk worker w1", nil, func() bool { return true })
	t0 := time.Unix(1_000_000, 0)
	var tot signalTotals
	steps := []struct {
		at   time.Duration
		step func()
		want string // the line logged at this step, "" none
	}{
		{0, func() { tot.exported = 5 }, ""},
		{1 * time.Second, func() { tot.notAcked = 3 }, "not delivered lost=3 not_acknowledged=3"},
		{2 * time.Second, func() { tot.notAcked = 10 }, ""},
		{10 * time.Second, func() { tot.streamFull = 2 }, ""},
		{20 * time.Second, func() { tot.exported = 6 }, ""}, // losses are pending: no recovery yet
		{31 * time.Second, func() {}, "not delivered lost=9 since=30s not_acknowledged=7 stream_full=2"},
		{32 * time.Second, func() { tot.exported = 9 }, "delivered again"},
		{33 * time.Second, func() { tot.exported = 12 }, ""},
		{40 * time.Second, func() { tot.queueFull, tot.tooLarge, tot.refused = 1, 1, 1 }, ""},
		{50 * time.Second, func() { tot.exported = 13 }, ""},
		{61 * time.Second, func() {}, "not delivered lost=3 since=30s refused=1 queue_full=1 too_large=1"},
		// the delivery at 50s came after the losses at 40s: said once
		// their line is out, though nothing more is delivered
		{62 * time.Second, func() {}, "delivered again"},
		{70 * time.Second, func() { tot.exported = 14 }, ""},
		{80 * time.Second, func() { tot.notAcked = 11 }, ""}, // held back: 19s since the last line
		{90 * time.Second, func() { tot.exported, tot.notAcked = 15, 12 }, ""},
		{92 * time.Second, func() {}, "not delivered lost=2 since=31s not_acknowledged=2"},
		{93 * time.Second, func() {}, ""}, // delivered and lost in one check: not a delivery after the loss
		{95 * time.Second, func() { tot.exported = 16 }, "delivered again"},
		{200 * time.Second, func() { tot.exported = 17 }, ""},
	}
	seen := 0
	for _, s := range steps {
		s.step()
		w.check(t0.Add(s.at), tot)
		lines := watchLines(t, buf.String())
		switch {
		case s.want == "" && len(lines) != seen:
			t.Fatalf("at %s: unexpected %v", s.at, lines[seen:])
		case s.want == "":
			continue
		case len(lines) != seen+1:
			t.Fatalf("at %s: want one line %q, have %v", s.at, s.want, lines[seen:])
		}
		l := lines[seen]
		seen++
		got := strings.TrimPrefix(l["msg"].(string), "adk worker w1: signals ")
		for _, k := range []string{"lost", "since", "not_acknowledged", "stream_full", "refused", "queue_full", "too_large"} {
			if v, ok := l[k]; ok {
				got += fmt.Sprintf(" %s=%v", k, v)
			}
		}
		if got != s.want || l["level"] != "WARN" || l["stream"] != bus.SignalStreamName {
			t.Fatalf("at %s: line %v, want %q", s.at, l, s.want)
		}
		if strings.HasPrefix(s.want, "not delivered") && (l["reason"] == "" || l["hint"] == "") {
			t.Fatalf("at %s: no reason or hint: %v", s.at, l)
		}
	}
}

// TestSignalWatch_RealPublishers runs the watch over a real publisher
// pool on an embedded JetStream server: with no ADK_SIGNALS stream the
// first loss is logged at once (not_acknowledged, naming the stream);
// once a stream exists the next delivery is logged; a stream that
// refuses (full, discarding new messages) is logged as stream_full, the
// later refusals in one line after the interval with their count. No
// line names the principal or carries a signal.
func TestSignalWatch_RealPublishers(t *testing.T) {
	srv := bustest.Start(t, bus.ServerConfig{})
	pool := bus.NewPublisherPool(srv.NC, bus.HighRatePublisherConfig(nil), 0)
	defer pool.Close()
	var buf testutil.Buffer
	w := newSignalWatch(slog.New(slog.NewJSONHandler(&buf, nil)), time.Second, "adk worker w1", pool.Stats, srv.NC.IsConnected)
	w.start(10 * time.Millisecond)
	defer w.stop()
	const principal, content = "team-secret", "the-user-prompt"
	n := 0
	publish := func(k int) {
		t.Helper()
		for range k {
			n++
			s := &observability.SpanSignal{Schema: 2, Signal: "span", Phase: "start", Name: "gen_ai.chat", Kind: "client",
				TraceID: fmt.Sprintf("%032x", n), SpanID: fmt.Sprintf("%016x", n), TraceFlags: 1, StartTimeUnixNano: int64(n) * 1e6,
				Attributes: observability.Attributes{"gen_ai.operation.name": content}}
			if _, err := pool.PublishSpans(principal, []*observability.SpanSignal{s}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitLine := func(i int, msg string) map[string]any {
		t.Helper()
		var l map[string]any
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("log line %d %q", i, msg), func() bool {
			lines := watchLines(t, buf.String())
			if len(lines) > i {
				l = lines[i]
				return true
			}
			return false
		})
		if l["msg"] != "adk worker w1: signals "+msg {
			t.Fatalf("line %d: %v, want %q", i, l, msg)
		}
		return l
	}

	publish(1)
	l := waitLine(0, "not delivered")
	if l["reason"] != "not_acknowledged" || l["lost"] != 1.0 || !strings.Contains(l["hint"].(string), bus.SignalStreamName) {
		t.Fatalf("no stream: %v", l)
	}

	srv.SignalStream(t, bus.SignalStreamConfig{MaxMsgs: 1, DiscardNew: true})
	publish(1)
	waitLine(1, "delivered again")

	publish(1) // the stream holds its one message: refused
	first := waitLine(2, "not delivered")
	if first["reason"] != "stream_full" || first["lost"] != 1.0 {
		t.Fatalf("full stream: %v", first)
	}
	publish(5)
	second := waitLine(3, "not delivered")
	t1, _ := time.Parse(time.RFC3339Nano, first["time"].(string))
	t2, _ := time.Parse(time.RFC3339Nano, second["time"].(string))
	if second["reason"] != "stream_full" || second["lost"] != 5.0 || second["stream_full"] != 5.0 ||
		second["since"] == nil || t2.Sub(t1) < 900*time.Millisecond { // a line's time is taken after its tick's
		t.Fatalf("refusals after %s: %v", t2.Sub(t1), second)
	}
	w.stop()
	if out := buf.String(); strings.Contains(out, principal) || strings.Contains(out, content) {
		t.Fatalf("a line names the principal or a signal: %s", out)
	}
}

// TestSignalWatch_PublishNotPermitted: a worker user that may not publish
// signals (a NATS configuration without adk.signal.* for it) loses them
// with no acknowledgement; the watch says so at once, with the hint
// naming the permission, and never the user's password.
func TestSignalWatch_PublishNotPermitted(t *testing.T) {
	const password = "worker-password-0123456789"
	w1 := bus.WorkerPermissions("w1", password)
	w1.PublishAllow = slices.DeleteFunc(w1.PublishAllow, func(s string) bool { return strings.HasPrefix(s, bus.SignalSubjectPrefix) })
	srv, err := bus.StartServer(bus.ServerConfig{Name: "perm", StoreDir: t.TempDir(), DontListen: true,
		Users: []bus.User{{Name: "admin", Password: "admin-password-0123"}, w1}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	admin, err := srv.Connect(nats.UserInfo("admin", "admin-password-0123"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := bus.WaitJetStreamReady(ctx, js); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureSignalStream(ctx, js, bus.SignalStreamConfig{}); err != nil {
		t.Fatal(err)
	}
	nc, err := srv.Connect(nats.UserInfo("w1", password), nats.CustomInboxPrefix(bus.WorkerInboxPrefix("w1")),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // the permission errors are expected
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cfg := bus.HighRatePublisherConfig(nil)
	cfg.BatchTimeout = 200 * time.Millisecond // the default waits 5 s per attempt for the ack that never comes
	pool := bus.NewPublisherPool(nc, cfg, 0)
	defer pool.Close()
	var buf testutil.Buffer
	w := newSignalWatch(slog.New(slog.NewJSONHandler(&buf, nil)), settings.Defaults().Log.SignalWarnInterval.D(), "adk worker w1", pool.Stats, nc.IsConnected)
	w.start(10 * time.Millisecond)
	defer w.stop()
	s := &observability.SpanSignal{Schema: 2, Signal: "span", Phase: "start", Name: "gen_ai.chat", Kind: "client",
		TraceID: fmt.Sprintf("%032x", 1), SpanID: fmt.Sprintf("%016x", 1), TraceFlags: 1, StartTimeUnixNano: 1e6}
	if _, err := pool.PublishSpans("team-a", []*observability.SpanSignal{s}); err != nil {
		t.Fatal(err)
	}
	var l map[string]any
	testutil.WaitFor(t, 20*time.Second, "a warning", func() bool {
		lines := watchLines(t, buf.String())
		if len(lines) > 0 {
			l = lines[0]
		}
		return l != nil
	})
	if l["reason"] != "not_acknowledged" || !strings.Contains(l["hint"].(string), "may this user publish to adk.signal.*") ||
		strings.Contains(buf.String(), password) {
		t.Fatalf("line %v", l)
	}
}
