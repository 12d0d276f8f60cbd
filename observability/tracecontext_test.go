package observability

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// hmap builds headers with non-canonical keys on purpose: extraction must
// match names case-insensitively however the map was built.
type hmap = map[string][]string

const validTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func reasonOf(err error) string {
	var tc *TraceContextError
	if errors.As(err, &tc) {
		return tc.Kind + "/" + tc.Reason
	}
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func TestTraceparent_RoundTrip(t *testing.T) {
	tp, err := ParseTraceparent(validTP)
	if err != nil {
		t.Fatal(err)
	}
	if tp.TraceID.String() != "4bf92f3577b34da6a3ce929d0e0e4736" || tp.SpanID.String() != "00f067aa0ba902b7" || tp.Flags != 1 {
		t.Fatalf("parsed %+v", tp)
	}
	got, err := FormatTraceparent(tp)
	if err != nil || got != validTP {
		t.Fatalf("format = %q, %v", got, err)
	}
}

func TestTraceparent_RejectionVectors(t *testing.T) {
	tid, sid := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	cases := []struct{ name, in, want string }{
		{"zero trace id", "00-" + strings.Repeat("0", 32) + "-" + sid + "-01", ReasonInvalidTraceID},
		{"zero span id", "00-" + tid + "-" + strings.Repeat("0", 16) + "-01", ReasonInvalidSpanID},
		{"uppercase trace id", "00-" + strings.ToUpper(tid) + "-" + sid + "-01", ReasonInvalidTraceID},
		{"uppercase span id", "00-" + tid + "-00F067AA0BA902B7-01", ReasonInvalidSpanID},
		{"non-hex trace id", "00-" + strings.Repeat("g", 32) + "-" + sid + "-01", ReasonInvalidTraceID},
		{"bad flags", "00-" + tid + "-" + sid + "-zz", ReasonInvalidTraceFlags},
		{"uppercase flags", "00-" + tid + "-" + sid + "-0A", ReasonInvalidTraceFlags},
		{"missing flags", "00-" + tid + "-" + sid, ReasonInvalidLength},
		{"wrong delimiter", "00-" + tid + "_" + sid + "-01", ReasonInvalidLength},
		{"no version prefix", tid + "-" + sid + "-01", ReasonInvalidLength},
		{"empty", "", ReasonInvalidLength},
		{"version ff", "ff-" + tid + "-" + sid + "-01", ReasonForbiddenVersion},
		{"version 01", "01-" + tid + "-" + sid + "-01", ReasonUnsupportedVersion},
		{"future version with extra field", "cc-" + tid + "-" + sid + "-01-extra", ReasonUnsupportedVersion},
		{"00 with trailing data", validTP + "-00", ReasonUnsupportedVersion},
		{"non-hex version", "zz-" + tid + "-" + sid + "-01", ReasonInvalidVersion},
		{"uppercase version", "FF-" + tid + "-" + sid + "-01", ReasonInvalidVersion},
		{"short", "00-abc", ReasonInvalidLength},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTraceparent(c.in)
			if got := reasonOf(err); got != KindInvalidTraceparent+"/"+c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

func TestTraceparent_FormatAndValidators(t *testing.T) {
	if _, err := FormatTraceparent(Traceparent{SpanID: SpanID{1}}); reasonOf(err) != KindInvalidTraceparent+"/"+ReasonInvalidTraceID {
		t.Fatalf("missing trace id: %v", err)
	}
	if _, err := FormatTraceparent(Traceparent{TraceID: TraceID{1}}); reasonOf(err) != KindInvalidTraceparent+"/"+ReasonInvalidSpanID {
		t.Fatalf("missing span id: %v", err)
	}
	for _, f := range []int{-1, 256} {
		if _, err := TraceFlagsFromInt(f); reasonOf(err) != KindInvalidTraceparent+"/"+ReasonInvalidTraceFlags {
			t.Errorf("flags %d: %v", f, err)
		}
	}
	for _, f := range []string{"GG", "0", "100", ""} {
		if _, err := ParseTraceFlags(f); reasonOf(err) != KindInvalidTraceparent+"/"+ReasonInvalidTraceFlags {
			t.Errorf("flags %q: %v", f, err)
		}
	}
	if f, err := ParseTraceFlags("ff"); err != nil || f != 255 {
		t.Fatalf("ff: %d %v", f, err)
	}
	if _, err := ParseTraceID(strings.Repeat("0", 32)); err == nil {
		t.Fatal("zero trace id accepted")
	}
	if _, err := ParseSpanID("00F067AA0BA902B7"); err == nil {
		t.Fatal("uppercase span id accepted")
	}
	tp := Traceparent{TraceID: TraceID{0xab}, SpanID: SpanID{0xcd}, Flags: 0}
	s, err := FormatTraceparent(tp)
	if err != nil || s != "00-ab000000000000000000000000000000-cd00000000000000-00" {
		t.Fatalf("format %q %v", s, err)
	}
}

func TestExtract_HeadersContract(t *testing.T) {
	t.Run("case-insensitive names and canonical tracestate", func(t *testing.T) {
		h := hmap{"TraceParent": {validTP}, "TRACESTATE": {" vendor=a ,\tother@sys=b "}}
		rc, err := Extract(h)
		if err != nil {
			t.Fatal(err)
		}
		if rc.Tracestate != "vendor=a,other@sys=b" || rc.Flags != 1 {
			t.Fatalf("rc = %+v", rc)
		}
	})
	cases := []struct {
		name string
		h    http.Header
		want string
	}{
		{"none", hmap{"X": {"1"}}, ErrTraceparentNotFound.Error()},
		{"nil", nil, ErrTraceparentNotFound.Error()},
		{"tracestate alone", hmap{"tracestate": {"a=b"}}, ErrTraceparentNotFound.Error()},
		{"duplicate values", hmap{"traceparent": {validTP, validTP}}, ErrDuplicateTraceparent.Error()},
		{"duplicate casings", hmap{"traceparent": {validTP}, "Traceparent": {validTP}}, ErrDuplicateTraceparent.Error()},
		{"duplicate tracestate", hmap{"traceparent": {validTP}, "tracestate": {"a=b"}, "TraceState": {"c=d"}}, KindInvalidTracestate + "/" + ReasonDuplicateHeader},
		{"1025-byte traceparent", hmap{"traceparent": {strings.Repeat("a", 1025)}}, KindInvalidTraceHeader + "/" + ReasonTraceparentHeader},
		{"1025-byte tracestate", hmap{"traceparent": {validTP}, "tracestate": {strings.Repeat("a", 1025)}}, KindInvalidTraceHeader + "/" + ReasonTracestateHeader},
		{"bad traceparent", hmap{"traceparent": {"ff" + validTP[2:]}}, KindInvalidTraceparent + "/" + ReasonForbiddenVersion},
		{"bad tracestate", hmap{"traceparent": {validTP}, "tracestate": {"A=b"}}, KindInvalidTracestate + "/" + ReasonInvalidKey},
		{"empty tracestate", hmap{"traceparent": {validTP}, "tracestate": {""}}, KindInvalidTracestate + "/" + ReasonEmpty},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Extract(c.h)
			if got := reasonOf(err); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

func TestInject_ReplacesAnyCasingAndKeepsOthers(t *testing.T) {
	h := hmap{"TraceParent": {"old"}, "TRACESTATE": {"old=1"}, "Authorization": {"keep"}}
	c := Correlation{TraceID: TraceID{1}, SpanID: SpanID{2}, Flags: 1, TraceState: " a=1 , b=2"}
	if err := Inject(h, c); err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || http.Header(h).Get("traceparent") != "00-01000000000000000000000000000000-0200000000000000-01" ||
		http.Header(h).Get("tracestate") != "a=1,b=2" || h["Authorization"][0] != "keep" {
		t.Fatalf("headers = %v", h)
	}
	// Without tracestate only traceparent is written.
	h2 := hmap{"tracestate": {"stale=1"}}
	if err := Inject(h2, Correlation{TraceID: TraceID{1}, SpanID: SpanID{2}}); err != nil || len(h2) != 1 || h2["tracestate"] != nil || h2["Tracestate"] != nil {
		t.Fatalf("h2 = %v, %v", h2, err)
	}
	// Invalid context: error and headers untouched.
	h3 := hmap{"traceparent": {"x"}}
	if err := Inject(h3, Correlation{SpanID: SpanID{2}}); err == nil || h3["traceparent"][0] != "x" {
		t.Fatalf("zero trace id injected: %v %v", err, h3)
	}
	if err := Inject(h3, Correlation{TraceID: TraceID{1}, SpanID: SpanID{2}, TraceState: "BAD=1"}); err == nil || h3["traceparent"][0] != "x" {
		t.Fatalf("bad tracestate injected: %v %v", err, h3)
	}
}

func TestTracestate_LimitsAndCanonicalization(t *testing.T) {
	members := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, "k"+itoa3(i)+"=v")
		}
		return strings.Join(parts, ",")
	}
	ok := []struct{ in, want string }{
		{"a=1", "a=1"},
		{" a=1 ,\tb=2\t", "a=1,b=2"},
		{"tenant.one@sys=x", "tenant.one@sys=x"},
		{"0ab-_*/=v v", "0ab-_*/=v v"},
		{members(32), members(32)},
		{"k=" + strings.Repeat("v", 256), "k=" + strings.Repeat("v", 256)},
		{strings.Repeat("k", 256) + "=v", strings.Repeat("k", 256) + "=v"},
		{strings.Repeat("t", 241) + "@" + strings.Repeat("s", 14) + "=v", strings.Repeat("t", 241) + "@" + strings.Repeat("s", 14) + "=v"},
	}
	for _, c := range ok {
		got, err := ParseTracestate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseTracestate(%.40q) = %q, %v", c.in, got, err)
		}
	}
	bad := []struct{ name, in, want string }{
		{"empty", "", ReasonEmpty},
		{"513 bytes", "k=" + strings.Repeat("v", 511), ReasonTooLarge},
		{"33 members", members(33), ReasonTooManyMembers},
		{"missing =", "abc", ReasonInvalidMember},
		{"empty member", "a=1,,b=2", ReasonInvalidMember},
		{"empty key", "=v", ReasonInvalidKey},
		{"uppercase key", "Key=v", ReasonInvalidKey},
		{"dot in simple key", "a.b=v", ReasonInvalidKey},
		{"two @", "a@b@c=v", ReasonInvalidKey},
		{"empty tenant", "@sys=v", ReasonInvalidKey},
		{"long system", "t@" + strings.Repeat("s", 15) + "=v", ReasonInvalidKey},
		{"long tenant", strings.Repeat("t", 242) + "@s=v", ReasonInvalidKey},
		{"257-byte key", strings.Repeat("k", 257) + "=v", ReasonInvalidKey},
		{"empty value", "a=", ReasonInvalidValue},
		{"= in value", "a=b=c", ReasonInvalidValue},
		{"control char", "a=b\x01", ReasonInvalidValue},
		{"non-ascii", "a=é", ReasonInvalidValue},
		{"257-byte value", "a=" + strings.Repeat("v", 257), ReasonInvalidValue},
		{"duplicate key", "a=1,b=2,a=3", ReasonDuplicateKey},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTracestate(c.in)
			if got := reasonOf(err); got != KindInvalidTracestate+"/"+c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

func itoa3(i int) string { return string([]byte{byte('0' + i/10), byte('0' + i%10)}) }

func TestContextFromHeaders_RemoteParent(t *testing.T) {
	h := hmap{"traceparent": {validTP}, "tracestate": {"v=1"}}
	ctx, err := ContextFromHeaders(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	sctx, sp, _ := tr.Begin(ctx, Observation{Kind: KindRun, RunID: "r1"})
	c := sp.Correlation()
	if c.TraceID.String() != validTP[3:35] || c.ParentID.String() != validTP[36:52] || c.Flags != 1 ||
		c.TraceState != "v=1" || c.SpanID.String() == validTP[36:52] || !c.Remote {
		t.Fatalf("correlation = %+v", c)
	}
	out := http.Header{}
	cur, _ := FromContext(sctx)
	if err := Inject(out, cur); err != nil {
		t.Fatal(err)
	}
	if got := out.Get("traceparent"); got != "00-"+validTP[3:35]+"-"+c.SpanID.String()+"-01" {
		t.Fatalf("outbound traceparent %s carries the wrong span", got)
	}
	_ = sp.End(Outcome{})

	if _, err := ContextFromHeaders(context.Background(), hmap{}); !errors.Is(err, ErrTraceparentNotFound) {
		t.Fatalf("no headers: %v", err)
	}
}

func FuzzTraceparent(f *testing.F) {
	f.Add(validTP)
	f.Add("ff" + validTP[2:])
	f.Add(strings.ToUpper(validTP))
	f.Add(validTP + "-ab")
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTraceparent(s)
		if err != nil {
			var tc *TraceContextError
			if !errors.As(err, &tc) || tc.Kind != KindInvalidTraceparent {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if tp.TraceID.IsZero() || tp.SpanID.IsZero() {
			t.Fatal("zero id accepted")
		}
		out, err := FormatTraceparent(tp)
		if err != nil || out != s {
			t.Fatalf("round trip %q -> %q (%v)", s, out, err)
		}
	})
}

func FuzzTracestate(f *testing.F) {
	f.Add("a=1")
	f.Add(" a=1 ,\tb@c=2")
	f.Add("a=1,a=2")
	f.Add(strings.Repeat("k=v,", 33))
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseTracestate(s)
		if err != nil {
			var tc *TraceContextError
			if !errors.As(err, &tc) || tc.Kind != KindInvalidTracestate {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(c) > len(s) || len(c) > MaxTracestateBytes || strings.ContainsAny(c, " \t") && strings.Contains(c, ", ") {
			t.Fatalf("canonical %q of %q", c, s)
		}
		again, err := ParseTracestate(c)
		if err != nil || again != c {
			t.Fatalf("canonical form not stable: %q -> %q (%v)", c, again, err)
		}
	})
}

func BenchmarkParseTraceparent(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseTraceparent(validTP); err != nil {
			b.Fatal(err)
		}
	}
}
