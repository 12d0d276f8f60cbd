package tracestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/vmihailenco/msgpack/v5"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func openStore(t testing.TB, o Options) *Store {
	t.Helper()
	return openStoreAt(t, t.TempDir(), o)
}

func openStoreAt(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir, Small: true, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func envelope(run, trace string, extra map[string]any) []byte {
	e := map[string]any{
		"schema_version": 1, "event": "adk.model.call", "timestamp_ms": 1000,
		"measurements":     map[string]any{"duration_ms": 3},
		"metadata":         map[string]any{"run_id": run, "trace_id": trace, "span_id": "00000000000000aa", "trace_flags": 1, "attributes": map[string]any{"hook": "before_model", "plugin_trace": []any{}}},
		"content_captured": false,
	}
	for k, v := range extra {
		e[k] = v
	}
	b, _ := json.Marshal(e)
	return b
}

func spanJSON(trace string, startNS int64) []byte {
	b, _ := json.Marshal(map[string]any{
		"schema_version": 2, "signal": "span", "phase": "start", "name": "gen_ai.chat", "kind": "client",
		"trace_id": trace, "span_id": "00000000000000bb", "trace_flags": 1, "start_time_unix_nano": startNS,
		"attributes": map[string]any{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5},
	})
	return b
}

func workflowJSON(wf, inv string, extra map[string]any) []byte {
	e := map[string]any{"schema_version": 1, "type": "node_started", "sequence": 1, "timestamp": 5,
		"workflow_id": wf, "workflow_kind": "sequential", "invocation_id": inv, "node_id": "n1"}
	for k, v := range extra {
		e[k] = v
	}
	b, _ := json.Marshal(e)
	return b
}

func appendOK(t *testing.T, s *Store, p, kind string, data []byte, ts int64) uint64 {
	t.Helper()
	c, err := s.Append(p, kind, data, ts)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return c
}

func ptr(v uint64) *uint64 { return &v }

func cursors(t *testing.T, p *Page) []uint64 {
	t.Helper()
	var out []uint64
	for _, e := range p.Events {
		var d struct{ Cursor uint64 }
		if err := json.Unmarshal(e, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Cursor)
	}
	return out
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if ErrorCode(err) != code {
		t.Fatalf("want %s, got %v", code, err)
	}
}

func TestStore_ConfigurationIsStrict(t *testing.T) {
	for _, o := range []Options{
		{MaxEvents: -1},
		{MaxEvents: MaxEventsLimit + 1},
		{MaxEventBytes: 8 << 20, MaxBytesPerPrincipal: 4 << 20, MaxBytes: 16 << 20},
		{ContentPolicy: "keep"},
		{Retention: time.Hour, LifecycleReceiverTTL: time.Minute},
	} {
		if _, err := Open(Config{InMemory: true, Small: true, Options: o}); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("%+v: %v", o, err)
		}
	}
}

func TestStore_ObservabilityEventsAreOrderedAndIdentityIndexed(t *testing.T) {
	s := openStore(t, Options{})
	c1 := appendOK(t, s, "alice", KindObservability, envelope("r1", "t1", nil), 1)
	c2 := appendOK(t, s, "alice", KindObservability, envelope("r1", "t2", nil), 2)
	appendOK(t, s, "alice", KindObservability, spanJSON("t1", 7_000_000), 3)
	if !(c1 < c2) || c1 != Cursor(1, 0) || c2 != Cursor(2, 0) {
		t.Fatalf("cursors %d %d", c1, c2)
	}
	p, err := s.Query("alice", Selector{"run_id": "r1", "trace_id": "t2"}, QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cursors(t, p); len(got) != 1 || got[0] != c2 {
		t.Fatalf("combined selector: %v", got)
	}
	var ev struct {
		Kind     string            `json:"kind"`
		Identity map[string]string `json:"identity"`
		TS       int64             `json:"timestamp_ms"`
	}
	_ = json.Unmarshal(p.Events[0], &ev)
	if ev.Kind != KindObservability || ev.Identity["run_id"] != "r1" || ev.Identity["trace_id"] != "t2" {
		t.Fatalf("identity %+v", ev)
	}
	p, _ = s.Query("alice", Selector{"trace_id": "t1"}, QueryOptions{})
	if got := cursors(t, p); len(got) != 2 {
		t.Fatalf("trace t1: %v", got)
	}
	_ = json.Unmarshal(p.Events[1], &ev)
	if ev.TS != 7 {
		t.Fatalf("span timestamp_ms = start ns / 1e6: %d", ev.TS)
	}
	if ps := s.PrincipalStatus("alice"); ps.Events != 3 || ps.LatestCursor != Cursor(3, 0) {
		t.Fatalf("principal status %+v", ps)
	}
	if _, err := s.Append("alice", KindObservability, []byte(`{"schema_version":1,"event":"x","timestamp_ms":1,"metadata":{}}`), 4); ErrorCode(err) != CodeIdentityRequired {
		t.Fatalf("no identity: %v", err)
	}
	if _, err := s.Query("alice", Selector{"session": "x"}, QueryOptions{}); ErrorCode(err) != CodeInvalidSelector {
		t.Fatalf("bad selector: %v", err)
	}
}

func TestStore_WorkflowLifecycleUsesExistingSchemaAndCombinedSelector(t *testing.T) {
	s := openStore(t, Options{})
	in := workflowJSON("wf1", "inv1", nil)
	c := appendOK(t, s, "alice", KindWorkflowLifecycle, in, 1)
	p, err := s.Query("alice", Selector{"workflow_id": "wf1", "invocation_id": "inv1"}, QueryOptions{})
	if err != nil || len(p.Events) != 1 || cursors(t, p)[0] != c {
		t.Fatalf("%v %v", p, err)
	}
	var ev struct{ Event map[string]any }
	_ = json.Unmarshal(p.Events[0], &ev)
	var want map[string]any
	_ = json.Unmarshal(in, &want)
	if fmt.Sprint(ev.Event) != fmt.Sprint(want) {
		t.Fatalf("not verbatim:\n%v\n%v", ev.Event, want)
	}
	bad := map[string]any{}
	_ = json.Unmarshal(workflowJSON("wf1", "inv1", nil), &bad)
	delete(bad, "workflow_id")
	b, _ := json.Marshal(bad)
	if _, err := s.Append("alice", KindWorkflowLifecycle, b, 2); ErrorCode(err) != CodeInvalidLifecycle {
		t.Fatalf("missing workflow_id: %v", err)
	}
}

func TestStore_MetadataOnlyRejectsContentByDefault(t *testing.T) {
	s := openStore(t, Options{})
	_, err1 := s.Append("alice", KindObservability, envelope("r", "t", map[string]any{"content_captured": true, "content": map[string]any{"prompt": "hi"}}), 1)
	nested := envelope("r", "t", nil)
	var m map[string]any
	_ = json.Unmarshal(nested, &m)
	m["metadata"].(map[string]any)["attributes"].(map[string]any)["tool"] = map[string]any{"arguments": map[string]any{"q": 1}}
	nested, _ = json.Marshal(m)
	_, err2 := s.Append("alice", KindObservability, nested, 2)
	wantCode(t, err1, CodeContentRejected)
	wantCode(t, err2, CodeContentRejected)
	if st := s.Status(); st.Counters.ContentRejected != 2 || st.Events != 0 {
		t.Fatalf("status %+v", st)
	}
}

func TestStore_TrustedPrunePolicyRemovesContentAndMarksRecord(t *testing.T) {
	s := openStore(t, Options{ContentPolicy: ContentPrune})
	in := envelope("r", "t", map[string]any{"content_captured": true, "content": "sk-secret-123", "payload": "x", "responseBody": "sk-secret-456"})
	appendOK(t, s, "alice", KindObservability, in, 1)
	p, _ := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{})
	raw := string(p.Events[0])
	if !strings.Contains(raw, `"content_pruned":true`) || strings.Contains(raw, "sk-secret") || strings.Contains(raw, "payload") || strings.Contains(raw, "responseBody") {
		t.Fatalf("pruned record: %s", raw)
	}
}

func TestStore_StrictProjectionRejectsAliasAndCasingBypasses(t *testing.T) {
	s := openStore(t, Options{})
	for i, alias := range []string{"payload", "input", "completion", "request-body", "responseBody", "PromptText", "payLoad", "completionText", "Tool_Arguments", "MESSAGES"} {
		// top level, nested in metadata attributes, and inside a span's attributes
		top := envelope("r", "t", map[string]any{alias: "x"})
		var m map[string]any
		_ = json.Unmarshal(envelope("r", "t", nil), &m)
		m["metadata"].(map[string]any)["attributes"].(map[string]any)["deep"] = []any{map[string]any{alias: "x"}}
		deep, _ := json.Marshal(m)
		var sp map[string]any
		_ = json.Unmarshal(spanJSON("t", 1), &sp)
		sp["attributes"].(map[string]any)[alias] = "x"
		spb, _ := json.Marshal(sp)
		wf := workflowJSON("w", "i", map[string]any{alias: "x"})
		for j, in := range [][]byte{top, deep, spb, wf} {
			kind := KindObservability
			if j == 3 {
				kind = KindWorkflowLifecycle
			}
			if _, err := s.Append("alice", kind, in, int64(i)); ErrorCode(err) != CodeContentRejected {
				t.Fatalf("%s (form %d): %v", alias, j, err)
			}
		}
	}
	if s.Status().Events != 0 {
		t.Fatal("something was stored")
	}
}

func TestStore_CapacityEvictionReportsExactReplayGap(t *testing.T) {
	s := openStore(t, Options{MaxEvents: 2, MaxEventsPerPrincipal: 2, MaxQueryEvents: 2})
	c1 := appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 1)
	c2 := appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 2)
	c3 := appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 3)
	_, err := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{AfterCursor: ptr(0)})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeReplayGap || e.Fields.Gap.EvictedThrough != c1 || *e.Fields.Gap.OldestAvailableCursor != c2 || e.Fields.Gap.LatestCursor != c3 {
		t.Fatalf("gap: %v %+v", err, e)
	}
	p, err := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{AfterCursor: ptr(c1)})
	if err != nil || fmt.Sprint(cursors(t, p)) != fmt.Sprint([]uint64{c2, c3}) {
		t.Fatalf("after c1: %v %v", p, err)
	}
	p, err = s.Query("alice", nil, QueryOptions{})
	if err != nil || fmt.Sprint(cursors(t, p)) != fmt.Sprint([]uint64{c2, c3}) {
		t.Fatalf("window: %v %v", p, err)
	}
	if s.Status().Counters.CapacityEvictions != 1 {
		t.Fatal("eviction not counted")
	}
}

func TestStore_QueryPagingIsBoundedAndCursorContinues(t *testing.T) {
	s := openStore(t, Options{})
	var cs []uint64
	for i := range 3 {
		cs = append(cs, appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), int64(i)))
	}
	p, _ := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{Limit: 2})
	if fmt.Sprint(cursors(t, p)) != fmt.Sprint(cs[:2]) || !p.Truncated || p.NextCursor != cs[1] {
		t.Fatalf("page 1 %+v", p)
	}
	p, _ = s.Query("alice", Selector{"run_id": "r"}, QueryOptions{Limit: 2, AfterCursor: &p.NextCursor})
	if fmt.Sprint(cursors(t, p)) != fmt.Sprint(cs[2:]) || p.Truncated {
		t.Fatalf("page 2 %+v", p)
	}
	_, err := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{AfterCursor: ptr(cs[2] + 99)})
	wantCode(t, err, CodeCursorAhead)
	// An unknown stream is an empty page, not cursor_ahead.
	p, err = s.Query("bob", nil, QueryOptions{AfterCursor: ptr(99)})
	if err != nil || len(p.Events) != 0 || p.LatestCursor != 0 || p.OldestAvailableCursor != nil {
		t.Fatalf("unknown stream: %+v %v", p, err)
	}
}

func TestStore_PrincipalCapacityAndScopeIsolationAreFailClosed(t *testing.T) {
	s := openStore(t, Options{MaxPrincipals: 1})
	appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 1)
	_, err := s.Append("bob", KindObservability, envelope("r", "t", nil), 2)
	wantCode(t, err, CodePrincipalCapacity)
	p, err := s.Query("bob", Selector{"run_id": "r"}, QueryOptions{})
	if err != nil || len(p.Events) != 0 {
		t.Fatalf("bob sees %v %v", p, err)
	}
	_, err = s.Append("", KindObservability, envelope("r", "t", nil), 3)
	wantCode(t, err, CodeInvalidPrincipal)
}

func TestStore_EventAndQueryByteLimitsAreStrict(t *testing.T) {
	s := openStore(t, Options{MaxEventBytes: 1024, MaxQueryBytes: 4096})
	big := envelope("r", "t", nil)
	var m map[string]any
	_ = json.Unmarshal(big, &m)
	m["metadata"].(map[string]any)["agent"] = strings.Repeat("a", 500)
	m["metadata"].(map[string]any)["model"] = strings.Repeat("m", 500)
	big, _ = json.Marshal(m)
	_, err := s.Append("alice", KindObservability, big, 1)
	wantCode(t, err, CodeEventTooLarge)
	_, err = s.Query("alice", nil, QueryOptions{MaxBytes: 1023})
	wantCode(t, err, CodeInvalidQueryOptions)
	if s.Status().Counters.OversizedRejected != 1 {
		t.Fatal("not counted")
	}
}

func TestStore_DeepTraceInputIsRejectedBeforeNormalization(t *testing.T) {
	s := openStore(t, Options{})
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	in := `{"schema_version":1,"event":"e","timestamp_ms":1,"metadata":{"run_id":"r","attributes":` + deep + `}}`
	_, err := s.Append("alice", KindObservability, []byte(in), 1)
	wantCode(t, err, CodeInputTooLarge)
	appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 2)
}

func TestStore_RetentionPruningPreservesGapTombstone(t *testing.T) {
	s := openStore(t, Options{Retention: time.Second, LifecycleReceiverTTL: time.Hour})
	c1 := appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 1_000)
	appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 1_500)
	// Stream time moves past the first event's retention.
	c3 := appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 2_200)
	if st := s.Status(); st.Counters.RetentionEvictions != 1 || st.Events != 2 {
		t.Fatalf("status %+v", st)
	}
	_, err := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{AfterCursor: ptr(0)})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeReplayGap || e.Fields.Gap.EvictedThrough != c1 || e.Fields.Gap.LatestCursor != c3 {
		t.Fatalf("gap %v", err)
	}
}

func TestStore_StatusNeverShowsThePrincipalAndClosedStoreIsUnavailable(t *testing.T) {
	s, err := Open(Config{InMemory: true, Small: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append("principal-secret-name", KindObservability, envelope("r", "t", nil), 1); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s.Status())
	d := Digest("principal-secret-name")
	if strings.Contains(string(b), "principal-secret-name") || strings.Contains(string(b), fmt.Sprintf("%x", d[:4])) {
		t.Fatalf("status leaks: %s", b)
	}
	_ = s.Close()
	_, err = s.Query("principal-secret-name", nil, QueryOptions{})
	wantCode(t, err, CodeUnavailable)
	_, err = s.Append("p", KindObservability, envelope("r", "t", nil), 1)
	wantCode(t, err, CodeUnavailable)
}

func TestStore_DurableAcrossRestartAndRedeliveryIsIgnored(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, Small: true, Options: Options{MaxEventsPerPrincipal: 3}})
	if err != nil {
		t.Fatal(err)
	}
	b := Batch{Seq: 5, TimeMS: 1, Principal: "alice", Records: []Record{
		{KindObservability, envelope("r", "t", nil)}, {KindObservability, envelope("r", "t2", nil)},
	}}
	if _, err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(Batch{Seq: 6, TimeMS: 2, Principal: "alice", Records: []Record{{KindObservability, envelope("r", "t", nil)}, {KindObservability, envelope("r", "t", nil)}}}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{})
	_ = s.Close()
	s = openStoreAt(t, dir, Options{MaxEventsPerPrincipal: 3})
	if s.AppliedSeq() != 6 {
		t.Fatalf("applied %d", s.AppliedSeq())
	}
	if res, err := s.Apply(b); err != nil || res != nil {
		t.Fatalf("redelivery applied: %v %v", res, err)
	}
	after, _ := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{})
	bj, _ := json.Marshal(before)
	aj, _ := json.Marshal(after)
	if string(bj) != string(aj) || len(after.Events) != 3 {
		t.Fatalf("differs after restart:\n%s\n%s", bj, aj)
	}
	if st := s.Status(); st.Events != 3 || st.Counters.CapacityEvictions != 1 {
		t.Fatalf("status after restart %+v", st)
	}
}

func TestStore_SmallPageQueryWorkIsIndependentOfStreamSize(t *testing.T) {
	s := openStore(t, Options{MaxEvents: 10_000, MaxEventsPerPrincipal: 10_000})
	recs := func(n, base int) []Record {
		out := make([]Record, n)
		for i := range out {
			out[i] = Record{KindObservability, envelope(fmt.Sprintf("r%d", (base+i)%10), "t", nil)}
		}
		return out
	}
	for seq := uint64(1); seq <= 100; seq++ {
		if _, err := s.Apply(Batch{Seq: seq, TimeMS: int64(seq), Principal: "alice", Records: recs(20, int(seq)*20)}); err != nil {
			t.Fatal(err)
		}
	}
	tail := Cursor(95, 0)
	p, err := s.Query("alice", Selector{"run_id": "r3"}, QueryOptions{AfterCursor: &tail, Limit: 5})
	if err != nil || len(p.Events) != 5 {
		t.Fatalf("%v %v", p, err)
	}
	if p.Scanned > 20 {
		t.Fatalf("a 5-event tail page read %d keys of a 2000-event stream", p.Scanned)
	}
}

func TestAppendJSON_MatchesEncodingJSON(t *testing.T) {
	v := map[string]any{"b": "x\"\\\n\t\u0001é\u2028<", "a": int64(-3), "c": []string{"p", "q"}, "d": map[string]string{"z": "1", "y": "2"},
		"e": map[string]any{"n": json.Number("1.5e3"), "t": true}, "f": uint64(7)}
	got := appendJSON(nil, v)
	var back, want any
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("invalid JSON %s: %v", got, err)
	}
	wb, _ := json.Marshal(v)
	_ = json.Unmarshal(wb, &want)
	if fmt.Sprint(back) != fmt.Sprint(want) {
		t.Fatalf("%s\n%s", got, wb)
	}
}

func TestStore_TombstonesExpireAfterRetentionInStreamTime(t *testing.T) {
	o := Options{Retention: time.Second, LifecycleReceiverTTL: time.Hour}
	dir := t.TempDir()
	s := openStoreAt(t, dir, o)
	c1 := appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 1_000)
	// bob's event at 2 100 expires alice's only event: alice keeps a tombstone.
	appendOK(t, s, "bob", KindObservability, envelope("r", "t", nil), 2_100)
	_, err := s.Query("alice", nil, QueryOptions{AfterCursor: ptr(0)})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeReplayGap || e.Fields.Gap.EvictedThrough != c1 || e.Fields.Gap.LatestCursor != c1 || e.Fields.Gap.OldestAvailableCursor != nil {
		t.Fatalf("tombstone gap: %v", err)
	}
	// Not yet: the tombstone was made at 2 100 and lives for 1 s of stream time.
	appendOK(t, s, "bob", KindObservability, envelope("r", "t", nil), 3_100)
	if st := s.Status(); st.Counters.TombstonesPruned != 0 {
		t.Fatalf("expired early: %+v", st.Counters)
	}
	_ = s.Close()
	s = openStoreAt(t, dir, o) // the tombstone and its time survive a restart
	if _, err := s.Query("alice", nil, QueryOptions{AfterCursor: ptr(0)}); ErrorCode(err) != CodeReplayGap {
		t.Fatalf("tombstone lost at restart: %v", err)
	}
	appendOK(t, s, "bob", KindObservability, envelope("r", "t", nil), 3_101)
	if st := s.Status(); st.Counters.TombstonesPruned != 1 || st.Counters.RetentionEvictions != 2 {
		t.Fatalf("counters %+v", st.Counters)
	}
	// Expired: alice reads as an unknown stream, with or without a cursor.
	for _, after := range []*uint64{nil, ptr(0), ptr(c1 + 99)} {
		p, err := s.Query("alice", nil, QueryOptions{AfterCursor: after})
		if err != nil || len(p.Events) != 0 || p.LatestCursor != 0 || p.OldestAvailableCursor != nil {
			t.Fatalf("after expiry: %+v %v", p, err)
		}
	}
	// alice's stream starts again; its old watermark is gone.
	c := appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 3_200)
	p, err := s.Query("alice", nil, QueryOptions{AfterCursor: ptr(0)})
	if err != nil || fmt.Sprint(cursors(t, p)) != fmt.Sprint([]uint64{c}) {
		t.Fatalf("new events: %v %v", p, err)
	}
}

func TestStore_TombstoneExpiryIsBoundedAndTheSameAfterRestart(t *testing.T) {
	o := Options{Retention: time.Second, LifecycleReceiverTTL: time.Hour, MaxPruneBatch: 2}
	batches := []Batch{}
	seq := uint64(0)
	add := func(p string, ts int64) {
		seq++
		batches = append(batches, Batch{Seq: seq, TimeMS: ts, Principal: p, Records: []Record{{KindObservability, envelope("r", "t", nil)}}})
	}
	for i := range 5 {
		add(fmt.Sprintf("p%d", i), 1_000)
	}
	add("keeper", 2_500) // evicts p0..p1 (prune batch 2) ...
	add("keeper", 2_600) // ... p2..p3
	add("keeper", 2_700) // ... p4
	for ts := int64(3_600); ts <= 4_000; ts += 100 {
		add("keeper", ts) // tombstones expire two per message
	}
	apply := func(s *Store, bs []Batch) {
		for _, b := range bs {
			if _, err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := openStore(t, o)
	apply(a, batches)
	dir := t.TempDir()
	b := openStoreAt(t, dir, o)
	half := len(batches) - 3
	apply(b, batches[:half])
	_ = b.Close()
	b = openStoreAt(t, dir, o)
	apply(b, batches[half:])
	sa, sb := a.Status(), b.Status()
	if sa.Counters != sb.Counters || sa.Counters.TombstonesPruned != 5 {
		t.Fatalf("counters differ or not all pruned:\n%+v\n%+v", sa.Counters, sb.Counters)
	}
	// Replay the expiry step by step: never more than MaxPruneBatch per message.
	c := openStore(t, o)
	var last uint64
	for _, bt := range batches {
		apply(c, []Batch{bt})
		n := c.Status().Counters.TombstonesPruned
		if n-last > 2 {
			t.Fatalf("%d tombstones pruned by one message", n-last)
		}
		last = n
	}
	for i := range 5 {
		pa, erra := a.Query(fmt.Sprintf("p%d", i), nil, QueryOptions{AfterCursor: ptr(0)})
		pb, errb := b.Query(fmt.Sprintf("p%d", i), nil, QueryOptions{AfterCursor: ptr(0)})
		ja, _ := json.Marshal(pa)
		jb, _ := json.Marshal(pb)
		if erra != nil || errb != nil || string(ja) != string(jb) {
			t.Fatalf("p%d: %s %v / %s %v", i, ja, erra, jb, errb)
		}
	}
}

func TestStore_OpenRefusesAnotherKeyLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, Small: true})
	if err != nil {
		t.Fatal(err)
	}
	appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 1)
	s.m.Layout = 0 // as a data directory written by layout 1, which did not record it
	mb, _ := msgpack.Marshal(&s.m)
	wb := s.db.NewWriteBatch()
	if err := wb.Set(metaKey, mb); err != nil {
		t.Fatal(err)
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := Open(Config{Dir: dir, Small: true}); err == nil || !strings.Contains(err.Error(), "layout 1") {
		t.Fatalf("opened another layout: %v", err)
	}
}

// TestStore_RestartedNodeAnswersByteIdentically applies one stream with
// every kind of eviction (per-principal and global quotas, retention,
// messages evicted in part and whole, tombstones) to a store that runs
// through and to one restarted midway, and compares every page.
func TestStore_RestartedNodeAnswersByteIdentically(t *testing.T) {
	o := Options{MaxEvents: 60, MaxEventsPerPrincipal: 35, MaxBytes: 40 << 10, MaxBytesPerPrincipal: 24 << 10,
		MaxEventBytes: 4 << 10, MaxQueryBytes: 16 << 10, MaxQueryEvents: 7, Retention: time.Second,
		LifecycleReceiverTTL: time.Hour, MaxPruneBatch: 5}
	var batches []Batch
	ts := int64(1_000)
	for seq := uint64(1); seq <= 120; seq++ {
		p := fmt.Sprintf("p%d", seq%3)
		if seq > 90 {
			p = "p0" // p1 and p2 go quiet: retention empties them, tombstones expire
		}
		var recs []Record
		for i := range int(seq*7) % 13 {
			run := fmt.Sprintf("r%d", (int(seq)+i)%4)
			if i%5 == 4 {
				recs = append(recs, Record{KindWorkflowLifecycle, workflowJSON("w"+run, "i", nil)})
				continue
			}
			recs = append(recs, Record{KindObservability, envelope(run, fmt.Sprintf("t%d", i%3), nil)})
		}
		ts += int64(seq%4) * 90
		batches = append(batches, Batch{Seq: seq, TimeMS: ts, Principal: p, Records: recs})
	}
	apply := func(s *Store, bs []Batch) {
		for _, b := range bs {
			if _, err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := openStore(t, o)
	apply(a, batches)
	dir := t.TempDir()
	b := openStoreAt(t, dir, o)
	apply(b, batches[:67])
	_ = b.Close()
	b = openStoreAt(t, dir, o)
	apply(b, batches[67:])
	// g applies the stream in group commits of 1..MaxApplyGroup batches,
	// one group reaching back over batches it already applied.
	g := openStore(t, o)
	for i, n := 0, 1; i < len(batches); i, n = i+n, n%MaxApplyGroup+1 {
		var preps []*Prepared
		for _, b := range batches[max(0, i-boolInt(n == 5)):min(len(batches), i+n)] {
			preps = append(preps, g.Prepare(b))
		}
		if _, err := g.ApplyPreparedGroup(preps); err != nil {
			t.Fatal(err)
		}
	}
	sa, sb := a.Status(), b.Status()
	if sa.Counters != sb.Counters || sa.Events != sb.Events || sa.EncodedBytes != sb.EncodedBytes {
		t.Fatalf("status differs:\n%+v\n%+v", sa, sb)
	}
	if sg := g.Status(); sa.Counters != sg.Counters || sa.Events != sg.Events || sa.EncodedBytes != sg.EncodedBytes || g.AppliedSeq() != a.AppliedSeq() {
		t.Fatalf("group-committed status differs:\n%+v\n%+v", sa, sg)
	}
	if da, dg := dumpBadger(t, a), dumpBadger(t, g); da != dg {
		t.Fatalf("group commits left other keys or values in Badger (%d vs %d bytes of dump)", len(da), len(dg))
	}
	c := sa.Counters
	if c.CapacityEvictions == 0 || c.RetentionEvictions == 0 || c.TombstonesPruned == 0 {
		t.Fatalf("the stream did not exercise every eviction: %+v", c)
	}
	dump := func(s *Store, p string, sel Selector, after *uint64) string {
		var out []string
		for range 100 {
			pg, err := s.Query(p, sel, QueryOptions{AfterCursor: after})
			if err != nil {
				j, _ := json.Marshal(err)
				return strings.Join(append(out, ErrorCode(err), string(j)), "\n")
			}
			j, _ := json.Marshal(pg)
			out = append(out, string(j))
			if !pg.Truncated {
				break
			}
			after = &pg.NextCursor
		}
		return strings.Join(out, "\n")
	}
	for _, p := range []string{"p0", "p1", "p2"} {
		for _, sel := range []Selector{nil, {"run_id": "r1"}, {"run_id": "r2", "trace_id": "t1"}, {"workflow_id": "wr3", "invocation_id": "i"}} {
			for _, after := range []*uint64{nil, ptr(0), ptr(Cursor(100, 0))} {
				if da, db := dump(a, p, sel, after), dump(b, p, sel, after); da != db {
					t.Fatalf("%s %v: pages differ:\n%s\n---\n%s", p, sel, da, db)
				}
				if da, dg := dump(a, p, sel, after), dump(g, p, sel, after); da != dg {
					t.Fatalf("%s %v: group-committed pages differ:\n%s\n---\n%s", p, sel, da, dg)
				}
			}
		}
	}
}

// TestStore_PagesReadNeighbouringAndDistantMessagesAlike: a run's events in
// adjacent messages (read by stepping one iterator), in messages more than
// maxMessageSteps apart (read by a seek), and in messages another
// principal's messages interleave, must page exactly as they were applied.
func TestStore_PagesReadNeighbouringAndDistantMessagesAlike(t *testing.T) {
	s := openStore(t, Options{MaxEvents: 10_000, MaxEventsPerPrincipal: 10_000})
	var want []uint64
	for seq := uint64(1); seq <= 120; seq++ {
		principal := "alice"
		if seq%3 == 0 {
			principal = "bob" // alice's message keys skip this seq
		}
		var recs []Record
		for i := 0; i < 4; i++ {
			run := "other"
			// r: adjacent messages 1..20, then every 13th message.
			if principal == "alice" && i%2 == 0 && (seq <= 20 || seq%13 == 0) {
				run = "r"
				want = append(want, Cursor(seq, i))
			}
			recs = append(recs, Record{KindObservability, envelope(run, "t", nil)})
		}
		if _, err := s.Apply(Batch{Seq: seq, TimeMS: int64(seq), Principal: principal, Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	var got []uint64
	var after *uint64
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatal("paging does not end")
		}
		p, err := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{AfterCursor: after, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Events) == 0 {
			break
		}
		got = append(got, cursors(t, p)...)
		after = ptr(p.NextCursor)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pages:\n got %v\nwant %v", got, want)
	}
	// One page over everything: the same, read in one transaction.
	p, err := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{Limit: 100})
	if err != nil || fmt.Sprint(cursors(t, p)) != fmt.Sprint(want) {
		t.Fatalf("one page: %v %v", p, err)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dumpBadger lists every key and value of a store's Badger.
func dumpBadger(t *testing.T, s *Store) string {
	t.Helper()
	var out strings.Builder
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(&out, "%x=%x\n", it.Item().Key(), v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestStore_LargeApplyGroupsCommitInParts: a group larger than half a
// Badger transaction is committed in parts, each with its own applied
// sequence, and still leaves what one-by-one applies leave.
func TestStore_LargeApplyGroupsCommitInParts(t *testing.T) {
	o := Options{MaxEvents: 300, MaxEventsPerPrincipal: 200, MaxEventBytes: 8 << 10}
	open := func() *Store {
		s, err := Open(Config{Dir: t.TempDir(), Small: true, Badger: BadgerTuning{MemTableSize: 1 << 20}, Options: o})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	var batches []Batch
	for seq := uint64(1); seq <= 64; seq++ {
		var recs []Record
		for i := range 12 {
			id := fmt.Sprintf("%x", sha256Sum(fmt.Sprint(seq, i)))
			recs = append(recs, Record{KindObservability, envelope("r"+fmt.Sprint(i%3), "t"+fmt.Sprint(seq%5),
				map[string]any{"metadata": map[string]any{"run_id": "r" + fmt.Sprint(i%3), "trace_id": id, "span_id": id[:16],
					"attributes": map[string]any{"gen_ai.response.id": strings.Repeat(id, 6)}}})})
		}
		batches = append(batches, Batch{Seq: seq, TimeMS: int64(seq), Principal: fmt.Sprintf("p%d", seq%2), Records: recs})
	}
	one, grouped := open(), open()
	for _, b := range batches {
		if _, err := one.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < len(batches); i += MaxApplyGroup {
		var preps []*Prepared
		for _, b := range batches[i:min(len(batches), i+MaxApplyGroup)] {
			preps = append(preps, grouped.Prepare(b))
		}
		if _, err := grouped.ApplyPreparedGroup(preps); err != nil {
			t.Fatal(err)
		}
	}
	so, sg := one.Status(), grouped.Status()
	if so.Counters != sg.Counters || so.Events != sg.Events || so.Counters.CapacityEvictions == 0 || grouped.AppliedSeq() != 64 {
		t.Fatalf("status differs or nothing was evicted:\n%+v\n%+v", so, sg)
	}
	if do, dg := dumpBadger(t, one), dumpBadger(t, grouped); do != dg {
		t.Fatalf("Badger contents differ (%d vs %d bytes of dump)", len(do), len(dg))
	}
}

func sha256Sum(s string) [32]byte { return Digest(s) }

// TestStore_FailedWriteStopsTheStoreAndReopenRebuildsFromDisk: a write
// that fails (here a fault before Badger's write) leaves memory ahead
// of the disk, so the store answers ErrFailed to applies, queries and
// waits from then on; reopened, it holds exactly what reached the disk and
// applies the failed sequence again.
func TestStore_FailedWriteStopsTheStoreAndReopenRebuildsFromDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, Small: true})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(seq uint64) Batch {
		return Batch{Seq: seq, TimeMS: int64(seq), Principal: "alice", Records: []Record{{KindObservability, envelope("r", "t", nil)}}}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if _, err := s.Apply(batch(seq)); err != nil {
			t.Fatal(err)
		}
	}
	s.writeFault = func() error { return errors.New("input/output error") } // the disk fails
	if _, err := s.Apply(batch(4)); !errors.Is(err, ErrFailed) {
		t.Fatalf("apply on a failed write: %v", err)
	}
	if !s.Failed() || !s.Status().Failed {
		t.Fatal("the store does not say it failed")
	}
	if _, err := s.Apply(batch(5)); err != ErrFailed {
		t.Fatalf("apply after the failure: %v", err)
	}
	if _, err := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{}); err != ErrFailed {
		t.Fatalf("query after the failure: %v", err)
	}
	if err := s.WaitApplied(context.Background(), 4); err != ErrFailed {
		t.Fatalf("wait after the failure: %v", err)
	}
	_ = s.Close()

	s = openStoreAt(t, dir, Options{})
	if s.AppliedSeq() != 3 || s.Status().Events != 3 {
		t.Fatalf("reopened: applied %d, %d events", s.AppliedSeq(), s.Status().Events)
	}
	if _, err := s.Apply(batch(4)); err != nil {
		t.Fatal(err)
	}
	p, err := s.Query("alice", Selector{"run_id": "r"}, QueryOptions{})
	if err != nil || fmt.Sprint(cursors(t, p)) != fmt.Sprint([]uint64{Cursor(1, 0), Cursor(2, 0), Cursor(3, 0), Cursor(4, 0)}) {
		t.Fatalf("%v %v", p, err)
	}
}

// TestStore_WaitAppliedWakesForEveryApply: WaitApplied returns once its
// sequence is applied, whenever the waiter wakes. The apply used to wake
// the waiters before it stored the new sequence: a waiter that ran in
// between saw the old one, waited again, and slept until the next apply
// (a store node's min_sequence query timed out; a test's wait for the
// last message never returned): within 1000 applies in 3 of 3 runs
// under -race.
func TestStore_WaitAppliedWakesForEveryApply(t *testing.T) {
	s := openStore(t, Options{})
	const waiters = 4
	for seq := uint64(1); seq <= 1000; seq++ {
		errs := make(chan error, waiters)
		for range waiters {
			go func() {
				// Only a missed wake-up takes this long.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				errs <- s.WaitApplied(ctx, seq)
			}()
		}
		b := Batch{Seq: seq, TimeMS: int64(seq), Principal: "alice", Records: []Record{{KindObservability, envelope("r", "t", nil)}}}
		if _, err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
		for range waiters {
			if err := <-errs; err != nil {
				t.Fatalf("wait for sequence %d: %v", seq, err)
			}
		}
	}
}
