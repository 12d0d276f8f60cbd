package otlpwire

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// partials are the responses the encoders are held to pdata's with.
var partials = []PartialSuccess{
	{},
	{Rejected: 3},
	{ErrorMessage: "span rejected: invalid"},
	{Rejected: 2, ErrorMessage: "span rejected: attributes_too_large"},
	{Rejected: -1, ErrorMessage: "negative"},
	{Rejected: math.MaxInt64},
	{Rejected: math.MinInt64},
	{Rejected: 1, ErrorMessage: "quote \" backslash \\ nl \n cr \r tab \t nul \x00 esc \x1b del \x7f"},
	{Rejected: 1, ErrorMessage: "<html> & é \u2028 \u2029 bad utf-8 \xff\xfe"},
}

// pdataResponse is what ptraceotlp or plogotlp writes for ps, in
// protobuf and in JSON.
func pdataResponse(t testing.TB, sig Signal, ps PartialSuccess) (proto, json []byte) {
	t.Helper()
	type response interface {
		MarshalProto() ([]byte, error)
		MarshalJSON() ([]byte, error)
	}
	var r response
	if sig == Logs {
		lr := plogotlp.NewExportResponse()
		lr.PartialSuccess().SetRejectedLogRecords(ps.Rejected)
		lr.PartialSuccess().SetErrorMessage(ps.ErrorMessage)
		r = lr
	} else {
		tr := ptraceotlp.NewExportResponse()
		tr.PartialSuccess().SetRejectedSpans(ps.Rejected)
		tr.PartialSuccess().SetErrorMessage(ps.ErrorMessage)
		r = tr
	}
	proto, err := r.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if json, err = r.MarshalJSON(); err != nil {
		t.Fatal(err)
	}
	return proto, json
}

// pdataParse is what ptraceotlp or plogotlp reads from a response body.
func pdataParse(sig Signal, body []byte, isJSON bool) (PartialSuccess, error) {
	if sig == Logs {
		r := plogotlp.NewExportResponse()
		var err error
		if isJSON {
			err = r.UnmarshalJSON(body)
		} else {
			err = r.UnmarshalProto(body)
		}
		return PartialSuccess{Rejected: r.PartialSuccess().RejectedLogRecords(), ErrorMessage: r.PartialSuccess().ErrorMessage()}, err
	}
	r := ptraceotlp.NewExportResponse()
	var err error
	if isJSON {
		err = r.UnmarshalJSON(body)
	} else {
		err = r.UnmarshalProto(body)
	}
	return PartialSuccess{Rejected: r.PartialSuccess().RejectedSpans(), ErrorMessage: r.PartialSuccess().ErrorMessage()}, err
}

func sigName(sig Signal) string {
	if sig == Logs {
		return "logs"
	}
	return "traces"
}

func TestAppendResponse_MatchesPdata(t *testing.T) {
	for _, sig := range []Signal{Traces, Logs} {
		t.Run(sigName(sig), func(t *testing.T) {
			for _, ps := range partials {
				wantProto, wantJSON := pdataResponse(t, sig, ps)
				if got, want := AppendResponseProto(nil, ps), wantProto; !bytes.Equal(got, want) {
					t.Errorf("proto %+v:\n got % x\nwant % x", ps, got, want)
				}
				if got, want := AppendResponseJSON(nil, sig, ps), wantJSON; !bytes.Equal(got, want) {
					t.Errorf("json %+v:\n got %s\nwant %s", ps, got, want)
				}
			}
		})
	}
	t.Run("EmptyResponse", func(t *testing.T) {
		if got := AppendResponseProto(nil, PartialSuccess{}); !bytes.Equal(got, []byte{0x0a, 0x00}) {
			t.Errorf("proto % x, want 0a 00", got)
		}
		if got := string(AppendResponseJSON(nil, Traces, PartialSuccess{})); got != `{"partialSuccess":{}}` {
			t.Errorf("json %s", got)
		}
	})
	t.Run("Appends", func(t *testing.T) {
		ps := PartialSuccess{Rejected: 2, ErrorMessage: "x"}
		if got := AppendResponseProto([]byte("pre"), ps); !bytes.HasPrefix(got, []byte("pre")) || !bytes.Equal(got[3:], AppendResponseProto(nil, ps)) {
			t.Errorf("proto append % x", got)
		}
		if got := AppendResponseJSON([]byte("pre"), Logs, ps); string(got) != "pre"+string(AppendResponseJSON(nil, Logs, ps)) {
			t.Errorf("json append %s", got)
		}
	})
}

// responseBodies are bodies the parsers are held to pdata's with:
// encodings of partials and the corners of both wire formats.
func responseBodies(t testing.TB) (proto, json [][]byte) {
	for _, sig := range []Signal{Traces, Logs} {
		for _, ps := range partials {
			p, j := pdataResponse(t, sig, ps)
			proto, json = append(proto, p), append(json, j)
		}
	}
	proto = append(proto, [][]byte{
		nil, {}, {0x0a}, {0x0a, 0x01}, {0x0a, 0x02, 0x08}, {0x0a, 0x02, 0x08, 0x05},
		{0x0a, 0x00, 0x0a, 0x02, 0x08, 0x07},                  // repeated partial_success: merged
		{0x0a, 0x02, 0x08, 0x07, 0x0a, 0x03, 0x12, 0x01, 'm'}, // merged across both
		{0x08, 0x01},                         // field 1 with the wrong wire type
		{0x0a, 0x02, 0x10, 0x01},             // rejected as a Len
		{0x0a, 0x02, 0x12, 0x01, 0x00},       // message cut short
		{0x18, 0x05, 0x0a, 0x02, 0x08, 0x03}, // unknown varint field first
		{0x1b, 0x1c, 0x0a, 0x02, 0x08, 0x03}, // an empty group
		{0x1b, 0x1c},                         // a group ending the body
		{0x1c, 0x0a, 0x00},                   // end group without a start
		{0x1e, 0x00},                         // wire type 6
		{0x00, 0x0a, 0x00},                   // field 0
		{0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x1d, 1, 2, 3, 4, 0x0a, 0x00}, // fixed64, fixed32
		{0x19, 1, 2, 3}, // fixed64 cut short
		{0x0a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},       // -1
		{0x0a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},       // tenth byte > 1
		{0x0a, 0x0c, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // too long
		{0x8a, 0x80, 0x80, 0x80, 0x80, 0x02, 0x02, 0x08, 0x09},                               // field 1 in a tag's low 32 bits
		{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},                         // length over int64
	}...)
	json = append(json,
		nil, []byte(``), []byte(`{}`), []byte(`null`), []byte(`[]`), []byte(`"x"`), []byte(`{`),
		[]byte(`{"partialSuccess":{"rejectedSpans":5}}`),
		[]byte(`{"partialSuccess":{"rejectedLogRecords":5}}`),
		[]byte(`{"partial_success":{"rejected_spans":"6","error_message":"m"}}`),
		[]byte(`{"partial_success":{"rejected_log_records":"6","error_message":"m"}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":"x"}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":1.5}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":1e3}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":true}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":null}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":-4}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":99999999999999999999}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":"9223372036854775808"}}`),
		[]byte(`{"partialSuccess":null}`),
		[]byte(`{"partialSuccess":{"x":[1,{"y":2}],"rejectedSpans":2}}`),
		[]byte(`{"other":{"rejectedSpans":2},"partialSuccess":{"errorMessage":"\u00e9\n"}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":1},"partialSuccess":{"errorMessage":"a"}}`),
		[]byte(`{"partialSuccess":{"rejectedSpans":1}} trailing`),
		[]byte(`{"partialSuccess":{"rejectedSpans":1}`),
		[]byte(`{"":{"rejectedSpans":1},"partialSuccess":{"rejectedSpans":1}}`),
		[]byte(` {"partialSuccess" : { "rejectedSpans" : 7 } } `),
	)
	return proto, json
}

// sameParse fails unless ours and pdata's read of one body agree: both
// refuse it, or both read the same partial success.
func sameParse(t *testing.T, what string, body []byte, got PartialSuccess, gotErr error, want PartialSuccess, wantErr error) {
	t.Helper()
	if (gotErr != nil) != (wantErr != nil) {
		t.Errorf("%s %q: error %v, pdata %v", what, body, gotErr, wantErr)
		return
	}
	if wantErr == nil && got != want {
		t.Errorf("%s %q: %+v, pdata %+v", what, body, got, want)
	}
}

func TestParseResponse_MatchesPdata(t *testing.T) {
	protos, jsons := responseBodies(t)
	for _, sig := range []Signal{Traces, Logs} {
		t.Run(sigName(sig), func(t *testing.T) {
			for _, b := range protos {
				got, gotErr := ParseResponseProto(b)
				want, wantErr := pdataParse(sig, b, false)
				sameParse(t, "proto", b, got, gotErr, want, wantErr)
			}
			for _, b := range jsons {
				got, gotErr := ParseResponseJSON(b, sig)
				want, wantErr := pdataParse(sig, b, true)
				sameParse(t, "json", b, got, gotErr, want, wantErr)
			}
		})
	}
	t.Run("ReadsWhatItWrites", func(t *testing.T) {
		for _, ps := range partials {
			if !strings.Contains(ps.ErrorMessage, "\xff") {
				if got, err := ParseResponseJSON(AppendResponseJSON(nil, Logs, ps), Logs); err != nil || got != ps {
					t.Errorf("json %+v: %+v, %v", ps, got, err)
				}
			}
			if got, err := ParseResponseProto(AppendResponseProto(nil, ps)); err != nil || got != ps {
				t.Errorf("proto %+v: %+v, %v", ps, got, err)
			}
		}
	})
}

// FuzzResponseMatchesPdata: for any body, ParseResponseProto and
// ParseResponseJSON read what ptraceotlp's and plogotlp's responses read
// (or both refuse it); for any count and message the encoders write
// pdata's bytes.
func FuzzResponseMatchesPdata(f *testing.F) {
	protos, jsons := responseBodies(f)
	for i, b := range protos {
		f.Add(b, false, int64(i), "")
	}
	for i, b := range jsons {
		f.Add(b, true, int64(-i), "m\x00\"é\xff")
	}
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool, rejected int64, msg string) {
		for _, sig := range []Signal{Traces, Logs} {
			var got PartialSuccess
			var gotErr error
			if isJSON {
				got, gotErr = ParseResponseJSON(body, sig)
			} else {
				got, gotErr = ParseResponseProto(body)
			}
			want, wantErr := pdataParse(sig, body, isJSON)
			sameParse(t, sigName(sig), body, got, gotErr, want, wantErr)
			ps := PartialSuccess{Rejected: rejected, ErrorMessage: msg}
			wantProto, wantJSON := pdataResponse(t, sig, ps)
			if g, w := AppendResponseProto(nil, ps), wantProto; !bytes.Equal(g, w) {
				t.Fatalf("proto %+v:\n got % x\nwant % x", ps, g, w)
			}
			if g, w := AppendResponseJSON(nil, sig, ps), wantJSON; !bytes.Equal(g, w) {
				t.Fatalf("json %+v:\n got %s\nwant %s", ps, g, w)
			}
		}
	})
}

// testTraces is a request with two resources, attributes, events and
// links.
func testTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	for r := range 2 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "svc")
		rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("scope")
		for i := range 3 {
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, byte(r), byte(i)})
			sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, byte(r), byte(i + 1)})
			sp.SetName("op")
			sp.SetKind(ptrace.SpanKindClient)
			sp.SetStartTimestamp(pcommon.Timestamp(1e18 + uint64(i)))
			sp.SetEndTimestamp(pcommon.Timestamp(1e18 + uint64(i) + 500))
			sp.Attributes().PutInt("gen_ai.usage.input_tokens", int64(i))
			sp.Events().AppendEmpty().SetName("event")
			sp.Links().AppendEmpty().SetTraceID(pcommon.TraceID{9})
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	return td
}

func TestEncodeTraces_MatchesPtraceotlp(t *testing.T) {
	for _, td := range []ptrace.Traces{ptrace.NewTraces(), testTraces()} {
		got, err := EncodeTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("EncodeTraces\n got % x\nwant % x", got, want)
		}
	}
}

// deprecatedRequest is a request of one resource whose fields are
// given as (field number, value): 1 resource, 2 scope_spans, 1000
// instrumentation_library_spans.
func deprecatedRequest(fields ...any) []byte {
	var rs []byte
	for i := 0; i < len(fields); i += 2 {
		rs = protowire.AppendTag(rs, protowire.Number(fields[i].(int)), protowire.BytesType)
		rs = protowire.AppendBytes(rs, fields[i+1].([]byte))
	}
	body := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(body, rs)
}

// scopeSpans is an encoded ScopeSpans of one span named name.
func scopeSpans(t testing.TB, name string) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName(name)
	sp.SetTraceID(pcommon.TraceID{1})
	sp.SetSpanID(pcommon.SpanID{1})
	b, err := EncodeTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	// b is field 1 (one ResourceSpans): its field 2 is the ScopeSpans.
	rs, n := protowire.ConsumeBytes(b[1:])
	if n < 0 {
		t.Fatal("bad encoding")
	}
	for len(rs) > 0 {
		num, typ, k := protowire.ConsumeTag(rs)
		l := protowire.ConsumeFieldValue(num, typ, rs[k:])
		if k < 0 || l < 0 {
			t.Fatal("bad encoding")
		}
		if num == 2 {
			ss, _ := protowire.ConsumeBytes(rs[k:])
			return ss
		}
		rs = rs[k+l:]
	}
	t.Fatal("no scope_spans")
	return nil
}

// decodeRequests are the requests DecodeTraces is held to ptraceotlp's
// decoder with.
func decodeRequests(t testing.TB) (proto, json [][]byte) {
	full, err := EncodeTraces(testTraces())
	if err != nil {
		t.Fatal(err)
	}
	js, err := ptraceotlp.NewExportRequestFromTraces(testTraces()).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	a, b := scopeSpans(t, "a"), scopeSpans(t, "b")
	proto = [][]byte{
		nil, full, full[:len(full)/2], {0x0a, 0x00}, {0x0a, 0x02, 0x12, 0x00},
		deprecatedRequest(1000, a),                // only the deprecated field: it becomes scope_spans
		deprecatedRequest(1000, a, 1000, b),       // two, in order
		deprecatedRequest(2, a, 1000, b),          // both: the deprecated one is dropped
		deprecatedRequest(1000, b, 2, a, 1000, b), // both, deprecated first
		deprecatedRequest(1, []byte{}, 1000, a, 3, []byte("schema")),
		append(deprecatedRequest(1000, a), full...),                                   // a migrated resource, then two plain ones
		append(append([]byte{0x18, 0x07}, deprecatedRequest(1000, b)...), 0x18, 0x01), // unknown fields around it
		deprecatedRequest(1000, []byte{0xff}),                                         // a deprecated entry pdata cannot read
	}
	json = [][]byte{
		js, nil, []byte(`{}`), []byte(`{"resourceSpans":[{}]}`), []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x"}]}]}]}`),
		[]byte(`{"resourceSpans":[{"instrumentationLibrarySpans":[{"spans":[{"name":"x"}]}]}]}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":1}]}]}]}`),
		[]byte(`{"resourceSpans":`),
	}
	return proto, json
}

// sameTraces fails unless ours and ptraceotlp's decode of body agree:
// the same error, or the same request. For JSON, ptraceotlp's result is
// migrated first (the one documented difference).
func sameTraces(t *testing.T, body []byte, isJSON bool) {
	t.Helper()
	got, gotErr := DecodeTraces(body, isJSON)
	req := ptraceotlp.NewExportRequest()
	var wantErr error
	if isJSON {
		wantErr = req.UnmarshalJSON(body)
	} else {
		wantErr = req.UnmarshalProto(body)
	}
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("json=%v %q: error %v, ptraceotlp %v", isJSON, body, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	g, err := EncodeTraces(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if isJSON {
		if m, ok := migrateScopeSpans(w); ok {
			w = m
		}
	}
	if !bytes.Equal(g, w) {
		t.Fatalf("json=%v %q:\n got % x\nwant % x", isJSON, body, g, w)
	}
}

func TestDecodeTraces_MatchesPtraceotlp(t *testing.T) {
	protos, jsons := decodeRequests(t)
	for _, b := range protos {
		sameTraces(t, b, false)
	}
	for _, b := range jsons {
		sameTraces(t, b, true)
	}
	t.Run("DeprecatedScopeSpansAreRead", func(t *testing.T) {
		td, err := DecodeTraces(deprecatedRequest(1000, scopeSpans(t, "a"), 1000, scopeSpans(t, "b")), false)
		if err != nil {
			t.Fatal(err)
		}
		if n := td.SpanCount(); n != 2 {
			t.Fatalf("spans %d, want 2", n)
		}
		ss := td.ResourceSpans().At(0).ScopeSpans()
		if ss.At(0).Spans().At(0).Name() != "a" || ss.At(1).Spans().At(0).Name() != "b" {
			t.Errorf("order changed")
		}
		td, err = DecodeTraces(deprecatedRequest(2, scopeSpans(t, "a"), 1000, scopeSpans(t, "b")), false)
		if err != nil || td.SpanCount() != 1 {
			t.Fatalf("with scope_spans: %d spans, %v; want 1 (the deprecated one dropped)", td.SpanCount(), err)
		}
	})
	t.Run("JSONDeprecatedKeyIsMigrated", func(t *testing.T) {
		body := []byte(`{"resourceSpans":[{"deprecatedScopeSpans":[{"spans":[{"name":"x"}]}]}]}`)
		td, err := DecodeTraces(body, true)
		if err != nil || td.SpanCount() != 1 {
			t.Fatalf("%d spans, %v; want 1", td.SpanCount(), err)
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalJSON(body); err != nil || req.Traces().SpanCount() != 0 {
			t.Fatalf("ptraceotlp read %d spans, %v: the documented difference is gone", req.Traces().SpanCount(), err)
		}
	})
	t.Run("NoDeprecatedFieldNoCopy", func(t *testing.T) {
		full, _ := EncodeTraces(testTraces())
		if _, ok := migrateScopeSpans(full); ok {
			t.Error("a request without field 1000 was rewritten")
		}
	})
}

// FuzzDecodeTracesMatchesPdata: for any body, DecodeTraces returns
// ptraceotlp's error or its request (for JSON, migrated as protobuf is).
func FuzzDecodeTracesMatchesPdata(f *testing.F) {
	protos, jsons := decodeRequests(f)
	for _, b := range protos {
		f.Add(b, false)
	}
	for _, b := range jsons {
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		sameTraces(t, body, isJSON)
	})
}
