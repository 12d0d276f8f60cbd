package otlpreceiver

import (
	"testing"
	"time"

	"github.com/fadcedab/adk/observability"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// telemetrygenRequest is a protobuf request shaped like telemetrygen's:
// n spans, half clients with a parent, each with the two peer attributes
// the generator sets (neither is kept), under a service.name resource; one
// span in eight also carries gen_ai metadata that is kept.
func telemetrygenRequest(tb testing.TB, n int) []byte {
	tb.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "telemetrygen")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("telemetrygen")
	base := uint64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	for i := range n {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{0xa, byte(i >> 8), byte(i), 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, byte(i >> 8), byte(i)})
		sp.SetKind(ptrace.SpanKindClient)
		sp.SetName("lets-go")
		if i%2 == 1 {
			sp.SetParentSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, byte((i - 1) >> 8), byte(i - 1)})
			sp.SetKind(ptrace.SpanKindServer)
			sp.SetName("okey-dokey-0")
		}
		sp.SetStartTimestamp(pcommon.Timestamp(base + uint64(i)*1000))
		sp.SetEndTimestamp(pcommon.Timestamp(base + uint64(i)*1000 + 123_000))
		a := sp.Attributes()
		a.PutStr("network.peer.address", "1.2.3.4")
		a.PutStr("peer.service", "telemetrygen-server")
		if i%8 == 0 {
			a.PutStr(observability.AttrOperationName, "chat")
			a.PutStr(observability.AttrRequestModel, "gpt-test")
			a.PutInt(observability.AttrInputTokens, 12)
			a.PutStr("run_id", "run-1")
		}
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// BenchmarkDecodeMapEncode: the receiver's CPU per span without HTTP and
// the bus: protobuf decode, mapping and the JSON each span is published
// as, for a telemetrygen-shaped request of 512 spans.
func BenchmarkDecodeMapEncode(b *testing.B) {
	const n = 512
	body := telemetrygenRequest(b, n)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := decode(body, false)
		if err != nil || len(m.records) != n {
			b.Fatal(err, len(m.records))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
}
