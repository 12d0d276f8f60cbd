package otlpexport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/internal/otlpwire"
	"github.com/fadcedab/adk/observability"
)

// Defaults and bounds of Config.
const (
	DefaultName             = "otlp"
	DefaultServiceName      = "adk"
	DefaultTimeout          = 10 * time.Second
	DefaultMaxAttempts      = 8
	DefaultMinBackoff       = 250 * time.Millisecond
	DefaultMaxBackoff       = 30 * time.Second
	DefaultMaxRetryAfter    = 60 * time.Second
	DefaultMaxBatchMessages = 64
	DefaultMaxBatchSpans    = 2048
	DefaultMaxRequestBytes  = 8 << 20
	DefaultLogInterval      = 30 * time.Second
	// maxResponseBytes bounds what is read of an answer: an
	// ExportTraceServiceResponse is a few bytes.
	maxResponseBytes = 64 << 10
	// ackWait is how long JetStream waits for an ack before it redelivers
	// a batch; the loop signals progress before every backoff, so only a
	// dead exporter's batch waits it out.
	ackWait = 2 * time.Minute
)

// Drop reasons: every span the exporter did not deliver is counted under
// exactly one of them.
const (
	DropMalformedMessage = "malformed_message" // a stream message that does not decode
	DropInvalidSpan      = "invalid_span"      // a span record the OTLP mapping refuses
	DropRejected         = "backend_rejected"  // a permanent HTTP answer (4xx, 3xx, 501, ...)
	DropPartial          = "partial_success"   // spans the backend reported as rejected
	DropRetriesExhausted = "retries_exhausted" // MaxAttempts transient failures
	DropTooLarge         = "request_too_large" // the encoded request exceeded MaxRequestBytes
)

// DropReasons lists the reasons in a stable order.
var DropReasons = []string{DropMalformedMessage, DropInvalidSpan, DropRejected, DropPartial, DropRetriesExhausted, DropTooLarge}

// Config configures an Exporter.
type Config struct {
	// Conn is the NATS connection; the caller owns it.
	Conn *nats.Conn
	// Name makes the durable consumer "adk-export-<Name>" (a subject
	// token; default "otlp"). Two exporters of one name share the
	// stream's position; different names each see every span.
	Name string
	// TracesURL is the full OTLP/HTTP traces URL (http or https, no
	// userinfo, query or fragment). Required.
	TracesURL string
	// Headers go on every request (e.g. authorization). Their values
	// never appear in logs, errors or metrics.
	Headers map[string]string
	// ServiceName is service.name of spans that carry none.
	ServiceName string
	// Timeout bounds one HTTP attempt.
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one batch before its spans are
	// dropped (retries_exhausted).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential backoff between
	// attempts; MaxRetryAfter caps an honoured Retry-After.
	MinBackoff, MaxBackoff, MaxRetryAfter time.Duration
	// MaxBatchMessages and MaxBatchSpans bound the batch in flight: its
	// stream messages (also the consumer's MaxAckPending) and spans.
	MaxBatchMessages int
	MaxBatchSpans    int
	// MaxRequestBytes bounds one encoded request.
	MaxRequestBytes int
	// MaxMsgBytes bounds one decoded stream message (the stream's
	// MaxMsgSize).
	MaxMsgBytes int
	// LogInterval is how often a line summarises new drops (never more
	// than one line per interval).
	LogInterval time.Duration
	Logger      *slog.Logger
}

// ConfigError names the field of a bad Config, never a value.
type ConfigError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return "invalid_otlp_export_config: " + e.Field + ": " + e.Reason
}

// Stats are the exporter's counters.
type Stats struct {
	// Messages are stream messages acked; Redelivered those JetStream
	// delivered more than once.
	Messages    uint64
	Redelivered uint64
	// Spans were accepted by the backend; Skipped are records that are
	// not completed spans (start phases, envelopes, lifecycle events).
	Spans   uint64
	Skipped uint64
	// Requests and Retries count HTTP attempts: first ones and repeats.
	Requests uint64
	Retries  uint64
	// Dropped counts undelivered spans (or messages, for
	// malformed_message) by reason.
	Dropped map[string]uint64
}

// DroppedTotal sums Dropped.
func (s Stats) DroppedTotal() uint64 {
	var n uint64
	for _, v := range s.Dropped {
		n += v
	}
	return n
}

// Exporter forwards ADK_SIGNALS to an OTLP/HTTP backend.
type Exporter struct {
	cfg     Config
	log     *slog.Logger
	cons    jetstream.Consumer
	client  *http.Client
	headers http.Header

	ctx    context.Context // cancelled by Stop: ends the attempt in flight
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	messages, redelivered, spans, skipped, requests, retries atomic.Uint64
	dropped                                                  [6]atomic.Uint64 // by DropReasons index
	lastLogged                                               uint64
	lastLog                                                  time.Time
}

// ConsumerName is the durable consumer of an exporter name.
func ConsumerName(name string) string { return "adk-export-" + name }

// Start validates cfg, creates or binds the durable consumer (ADK_SIGNALS
// must exist) and starts forwarding. Stop it.
func Start(ctx context.Context, cfg Config) (*Exporter, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, bus.SignalStreamName)
	if err != nil {
		return nil, fmt.Errorf("otlpexport: stream %s: %w", bus.SignalStreamName, err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       ConsumerName(cfg.Name),
		Description:   "adk export otlp",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxAckPending: cfg.MaxBatchMessages,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("otlpexport: consumer: %w", err)
	}
	e := &Exporter{cfg: cfg, log: cfg.Logger, cons: cons, done: make(chan struct{}), lastLog: time.Now()}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.headers = make(http.Header, len(cfg.Headers)+2)
	for k, v := range cfg.Headers {
		e.headers.Set(k, v)
	}
	e.headers.Set("Content-Type", "application/x-protobuf")
	e.headers.Set("User-Agent", "adk-export-otlp/1")
	e.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil, // the operator named the host: no ambient proxy
			DialContext:           (&net.Dialer{Timeout: cfg.Timeout}).DialContext,
			TLSHandshakeTimeout:   cfg.Timeout,
			ResponseHeaderTimeout: cfg.Timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       30 * time.Second,
		},
		// A redirect is a refusal: following it would send the headers
		// (credentials) to a host the operator did not name.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	go e.loop()
	return e, nil
}

func (c *Config) normalize() error {
	if c.Conn == nil {
		return &ConfigError{"conn", "required"}
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if err := bus.ValidToken(c.Name); err != nil {
		return &ConfigError{"name", "must be a subject token (letters, digits, - and _)"}
	}
	if err := ValidateTracesURL(c.TracesURL); err != nil {
		return err
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Timeout, DefaultTimeout)
	def(&c.MinBackoff, DefaultMinBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	def(&c.MaxRetryAfter, DefaultMaxRetryAfter)
	def(&c.LogInterval, DefaultLogInterval)
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt(&c.MaxAttempts, DefaultMaxAttempts)
	defInt(&c.MaxBatchMessages, DefaultMaxBatchMessages)
	defInt(&c.MaxBatchSpans, DefaultMaxBatchSpans)
	defInt(&c.MaxRequestBytes, DefaultMaxRequestBytes)
	defInt(&c.MaxMsgBytes, int(bus.DefaultSignalMaxMsgSize))
	return nil
}

// ValidateTracesURL accepts an absolute http(s) URL without userinfo,
// query or fragment. Its error names the problem, never the URL (it may
// carry a tenant id).
func ValidateTracesURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return &ConfigError{"endpoint", "required"}
	case err != nil:
		return &ConfigError{"endpoint", "not a URL"}
	case u.Scheme != "http" && u.Scheme != "https":
		return &ConfigError{"endpoint", "scheme must be http or https"}
	case u.Host == "":
		return &ConfigError{"endpoint", "host required"}
	case u.User != nil:
		return &ConfigError{"endpoint", "userinfo not allowed (use OTEL_EXPORTER_OTLP_HEADERS)"}
	case u.RawQuery != "" || u.Fragment != "" || strings.Contains(s, "#"):
		return &ConfigError{"endpoint", "query and fragment not allowed"}
	}
	return nil
}

// TracesURL turns an endpoint into the traces URL the way
// OTEL_EXPORTER_OTLP_ENDPOINT does: a base URL gets /v1/traces appended,
// unless its path already ends with /v1/traces.
func TracesURL(endpoint string) string {
	e := strings.TrimSuffix(endpoint, "/")
	if strings.HasSuffix(e, "/v1/traces") {
		return e
	}
	return e + "/v1/traces"
}

// Stop ends forwarding: it cancels an attempt in flight, naks the batch it
// held (redelivered at once to the next exporter of this name) and waits
// for the loop.
func (e *Exporter) Stop() {
	e.once.Do(func() {
		e.cancel()
		<-e.done
		e.client.CloseIdleConnections()
		e.logDrops(true)
	})
}

// Stats returns the counters.
func (e *Exporter) Stats() Stats {
	s := Stats{
		Messages: e.messages.Load(), Redelivered: e.redelivered.Load(), Spans: e.spans.Load(),
		Skipped: e.skipped.Load(), Requests: e.requests.Load(), Retries: e.retries.Load(),
		Dropped: make(map[string]uint64, len(DropReasons)),
	}
	for i, r := range DropReasons {
		s.Dropped[r] = e.dropped[i].Load()
	}
	return s
}

func (e *Exporter) drop(reason string, n int) {
	if n <= 0 {
		return
	}
	for i, r := range DropReasons {
		if r == reason {
			e.dropped[i].Add(uint64(n))
			return
		}
	}
}

// batch is the bounded batch in flight: its messages (acked together) and
// the request its spans make.
type batch struct {
	msgs  []jetstream.Msg
	td    ptrace.Traces
	rs    map[string]ptrace.SpanSlice // resource key → its spans
	spans int
}

func newBatch() *batch { return &batch{td: ptrace.NewTraces(), rs: map[string]ptrace.SpanSlice{}} }

func (e *Exporter) loop() {
	defer close(e.done)
	for e.ctx.Err() == nil {
		msgs := e.fetch(e.cfg.MaxBatchMessages)
		b := newBatch()
		for i, m := range msgs {
			sb, ok := e.decode(m)
			if len(b.msgs) > 0 && b.spans+len(sb.Records) > e.cfg.MaxBatchSpans {
				// The batch is full: send it first. The rest stay ours
				// (fetched, unacked) for the next batch.
				e.send(b)
				b = newBatch()
				if e.ctx.Err() != nil {
					nakAll(msgs[i:])
					return
				}
			}
			e.add(b, m, sb, ok)
		}
		if len(b.msgs) > 0 {
			e.send(b)
		}
		e.logDrops(false)
	}
}

// fetch waits (up to a second, or until Stop) for one message, then takes
// what else is ready without waiting, up to n in all.
func (e *Exporter) fetch(n int) []jetstream.Msg {
	ctx, cancel := context.WithTimeout(e.ctx, time.Second)
	first, err := e.cons.Next(jetstream.FetchContext(ctx))
	cancel()
	if err != nil || first == nil {
		return nil
	}
	msgs := []jetstream.Msg{first}
	if n > 1 {
		if rest, err := e.cons.FetchNoWait(n - 1); err == nil {
			for m := range rest.Messages() {
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

// decode reads a stream message; a message that is not a signal batch
// of a principal's subject is counted as malformed (and acked with its
// batch).
func (e *Exporter) decode(m jetstream.Msg) (bus.SignalBatch, bool) {
	if _, err := bus.PrincipalFromSubject(m.Subject()); err != nil {
		e.drop(DropMalformedMessage, 1)
		return bus.SignalBatch{}, false
	}
	sb, err := bus.DecodeSignalMessage(m.Headers(), m.Data(), e.cfg.MaxMsgBytes)
	if err != nil {
		e.drop(DropMalformedMessage, 1)
		return bus.SignalBatch{}, false
	}
	return sb, true
}

// add maps a message's completed spans into the batch.
func (e *Exporter) add(b *batch, m jetstream.Msg, sb bus.SignalBatch, ok bool) {
	b.msgs = append(b.msgs, m)
	if md, err := m.Metadata(); err == nil && md.NumDelivered > 1 {
		e.redelivered.Add(1)
	}
	if !ok {
		return
	}
	for _, r := range sb.Records {
		if r.Kind != bus.RecordObservability || !bytes.Contains(r.Data, []byte(`"signal":"span"`)) {
			e.skipped.Add(1)
			continue
		}
		var s observability.SpanSignal
		if err := json.Unmarshal(r.Data, &s); err != nil || s.Signal != "span" {
			e.drop(DropInvalidSpan, 1)
			continue
		}
		if s.Phase == observability.PhaseStart {
			e.skipped.Add(1)
			continue
		}
		key, res := e.resourceOf(&s)
		spans, ok := b.rs[key]
		if !ok {
			rs := b.td.ResourceSpans().AppendEmpty()
			for _, k := range observability.ResourceAttributeKeys {
				if v, ok := res[k]; ok {
					rs.Resource().Attributes().PutStr(k, v)
				}
			}
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("adk")
			spans = ss.Spans()
			b.rs[key] = spans
		}
		if err := observability.AppendSpanOTLP(&s, spans); err != nil {
			e.drop(DropInvalidSpan, 1)
			continue
		}
		b.spans++
	}
}

// resourceOf moves the span's resource attributes out of its attributes
// and returns them with their grouping key.
func (e *Exporter) resourceOf(s *observability.SpanSignal) (string, map[string]string) {
	res := map[string]string{"service.name": e.cfg.ServiceName}
	var key strings.Builder
	for _, k := range observability.ResourceAttributeKeys {
		v, ok := s.Attributes[k]
		if !ok {
			continue
		}
		delete(s.Attributes, k)
		if str, ok := v.(string); ok && str != "" {
			res[k] = str
		}
	}
	ks := make([]string, 0, len(res))
	for k := range res {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		key.WriteString(k)
		key.WriteByte(0)
		key.WriteString(res[k])
		key.WriteByte(0)
	}
	return key.String(), res
}

func nakAll(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Nak()
	}
}

func ackAll(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Ack()
	}
}

// send delivers the batch (with retries) and acks it, or naks it when
// Stop interrupted the delivery.
func (e *Exporter) send(b *batch) {
	if b.spans == 0 {
		ackAll(b.msgs)
		e.messages.Add(uint64(len(b.msgs)))
		return
	}
	body, err := otlpwire.EncodeTraces(b.td)
	if err != nil || len(body) > e.cfg.MaxRequestBytes {
		e.drop(DropTooLarge, b.spans)
		ackAll(b.msgs)
		e.messages.Add(uint64(len(b.msgs)))
		return
	}
	for attempt := 1; ; attempt++ {
		if attempt == 1 {
			e.requests.Add(1)
		} else {
			e.retries.Add(1)
		}
		res := e.post(body)
		switch {
		case e.ctx.Err() != nil:
			nakAll(b.msgs)
			return
		case res.ok:
			e.spans.Add(uint64(b.spans - int(res.rejected)))
			e.drop(DropPartial, int(res.rejected))
		case !res.retryable:
			e.drop(DropRejected, b.spans)
		case attempt >= e.cfg.MaxAttempts:
			e.drop(DropRetriesExhausted, b.spans)
		default:
			for _, m := range b.msgs {
				_ = m.InProgress()
			}
			if !e.wait(e.backoff(attempt, res.retryAfter)) {
				nakAll(b.msgs)
				return
			}
			continue
		}
		ackAll(b.msgs)
		e.messages.Add(uint64(len(b.msgs)))
		return
	}
}

// backoff is exponential with equal jitter, at least a Retry-After.
func (e *Exporter) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := e.cfg.MinBackoff << min(attempt-1, 20)
	if d <= 0 || d > e.cfg.MaxBackoff {
		d = e.cfg.MaxBackoff
	}
	d = d/2 + rand.N(d/2+1)
	return max(d, min(retryAfter, e.cfg.MaxRetryAfter))
}

// wait sleeps for d unless Stop comes first.
func (e *Exporter) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-e.ctx.Done():
		return false
	}
}

type result struct {
	ok, retryable bool
	retryAfter    time.Duration
	rejected      int64
}

func (e *Exporter) post(body []byte) result {
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.TracesURL, bytes.NewReader(body))
	if err != nil {
		return result{}
	}
	req.Header = e.headers.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		return result{retryable: true} // connect, timeout, reset: the backend may come back
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return result{ok: true, rejected: partialRejected(resp.Header.Get("Content-Type"), rb)}
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		return result{retryable: true, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	case code == http.StatusRequestTimeout || code == http.StatusBadGateway || code == http.StatusGatewayTimeout:
		return result{retryable: true}
	}
	return result{}
}

// partialRejected reads partial_success.rejected_spans of a success
// answer; an answer it cannot read (empty, oversized, another type) is a
// full success, as the backend's 2xx says.
func partialRejected(contentType string, body []byte) int64 {
	if len(body) == 0 || len(body) > maxResponseBytes {
		return 0
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	var ps otlpwire.PartialSuccess
	var err error
	switch mt {
	case "application/x-protobuf":
		ps, err = otlpwire.ParseResponseProto(body)
	case "application/json":
		ps, err = otlpwire.ParseResponseJSON(body, otlpwire.Traces)
	default:
		return 0
	}
	if err != nil || ps.Rejected < 0 {
		return 0
	}
	return ps.Rejected
}

// parseRetryAfter reads delay-seconds or an HTTP date; anything else is no
// delay.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(min(n, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), 24*time.Hour)
	}
	return 0
}

// logDrops writes one line when spans were dropped since the last line,
// at most once per LogInterval (or now, at stop). Reasons and counts only.
func (e *Exporter) logDrops(force bool) {
	if !force && time.Since(e.lastLog) < e.cfg.LogInterval {
		return
	}
	st := e.Stats()
	total := st.DroppedTotal()
	if total == e.lastLogged {
		return
	}
	attrs := []any{"new", total - e.lastLogged, "total", total}
	for _, r := range DropReasons {
		if st.Dropped[r] > 0 {
			attrs = append(attrs, r, st.Dropped[r])
		}
	}
	e.log.Warn("otlp export dropped spans", attrs...)
	e.lastLogged, e.lastLog = total, time.Now()
}

// Done is closed when the loop has ended (after Stop).
func (e *Exporter) Done() <-chan struct{} { return e.done }
