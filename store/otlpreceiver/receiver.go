package otlpreceiver

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/internal/otlpwire"
)

// TracesPath is the OTLP/HTTP traces path.
const TracesPath = "/v1/traces"

// Content types the receiver accepts; the response uses the request's.
const (
	ContentTypeProtobuf = "application/x-protobuf"
	ContentTypeJSON     = "application/json"
)

// Default body limits.
const (
	DefaultMaxBodyBytes    = 4 << 20
	DefaultMaxDecodedBytes = 16 << 20
)

// RetryAfterSeconds is the Retry-After of a back-pressure 503.
const RetryAfterSeconds = 1

var (
	// ErrMalformed reports a body that does not decode as an
	// ExportTraceServiceRequest (or a corrupt gzip stream).
	ErrMalformed = errors.New("malformed_otlp_request")
	// ErrTooLarge reports a body over the compressed or decompressed limit.
	ErrTooLarge = errors.New("otlp_request_too_large")
)

// Authenticator maps a bearer token to its principal
// (tracenode.Tokens implements it).
type Authenticator interface {
	Principal(token string) (string, bool)
}

// SpanPublisher publishes encoded records for a principal
// (bus.PublisherPool implements it). The receiver publishes each mapped
// span as one bus.RecordObservability record (v2 span JSON), in order,
// and stops at the first refusal.
type SpanPublisher interface {
	PublishRecord(principal, kind string, data []byte) error
}

// Config configures a Receiver.
type Config struct {
	// Auth authenticates bearer tokens; required.
	Auth Authenticator
	// Publisher publishes under the authenticated principal; required.
	Publisher SpanPublisher
	// MaxBodyBytes bounds the request body as sent (4 MiB);
	// MaxDecodedBytes bounds it after gzip inflation (16 MiB).
	MaxBodyBytes    int64
	MaxDecodedBytes int64
	// Logger receives request rejections at debug level; never a token.
	Logger *slog.Logger
}

// Stats are the receiver's counters. Spans: Received = Accepted +
// Rejected + Backpressured (for requests that reached mapping).
type Stats struct {
	Requests                 uint64 `json:"requests"`
	Unauthorized             uint64 `json:"unauthorized"`
	Malformed                uint64 `json:"malformed"`
	TooLarge                 uint64 `json:"too_large"`
	UnsupportedMedia         uint64 `json:"unsupported_media"`
	Unavailable              uint64 `json:"unavailable"`
	SpansReceived            uint64 `json:"spans_received"`
	SpansAccepted            uint64 `json:"spans_accepted"`
	SpansRejected            uint64 `json:"spans_rejected"`
	SpansBackpressured       uint64 `json:"spans_backpressured"`
	ContentAttributesDropped uint64 `json:"content_attributes_dropped"`
}

type counters struct {
	requests, unauthorized, malformed, tooLarge, unsupported, unavailable,
	received, accepted, rejected, backpressured, contentDropped atomic.Uint64
}

// Receiver is the OTLP/HTTP traces handler. It is safe for concurrent use
// and owns no goroutines.
type Receiver struct {
	cfg  Config
	log  *slog.Logger
	c    counters
	bufs sync.Pool // *bytes.Buffer
}

var (
	_ http.Handler  = (*Receiver)(nil)
	_ SpanPublisher = (*bus.PublisherPool)(nil)
)

// New makes a Receiver.
func New(cfg Config) (*Receiver, error) {
	if cfg.Auth == nil || cfg.Publisher == nil {
		return nil, errors.New("otlpreceiver: Auth and Publisher are required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxDecodedBytes <= 0 {
		cfg.MaxDecodedBytes = DefaultMaxDecodedBytes
	}
	cfg.MaxDecodedBytes = max(cfg.MaxDecodedBytes, cfg.MaxBodyBytes)
	r := &Receiver{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.bufs.New = func() any { return new(bytes.Buffer) }
	return r, nil
}

// Stats returns a snapshot of the counters.
func (r *Receiver) Stats() Stats {
	c := &r.c
	return Stats{
		Requests: c.requests.Load(), Unauthorized: c.unauthorized.Load(), Malformed: c.malformed.Load(),
		TooLarge: c.tooLarge.Load(), UnsupportedMedia: c.unsupported.Load(), Unavailable: c.unavailable.Load(),
		SpansReceived: c.received.Load(), SpansAccepted: c.accepted.Load(), SpansRejected: c.rejected.Load(),
		SpansBackpressured: c.backpressured.Load(), ContentAttributesDropped: c.contentDropped.Load(),
	}
}

// ServeHTTP implements http.Handler for POST /v1/traces.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.c.requests.Add(1)
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	principal, ok := r.authenticate(req)
	if !ok {
		r.c.unauthorized.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="adk"`)
		writeStatus(w, contentType(req), http.StatusUnauthorized, 16, "unauthenticated")
		return
	}
	ct, ok := contentType(req), true
	if ct == "" {
		r.c.unsupported.Add(1)
		http.Error(w, "content type must be application/x-protobuf or application/json", http.StatusUnsupportedMediaType)
		return
	}
	gz := false
	switch enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz = true
	default:
		ok = false
	}
	if !ok {
		r.c.unsupported.Add(1)
		writeStatus(w, ct, http.StatusUnsupportedMediaType, 3, "unsupported content encoding")
		return
	}
	buf := r.bufs.Get().(*bytes.Buffer)
	defer r.putBuf(buf)
	if err := r.readBody(w, req, gz, buf); err != nil {
		if errors.Is(err, ErrTooLarge) {
			r.c.tooLarge.Add(1)
			writeStatus(w, ct, http.StatusRequestEntityTooLarge, 8, "request too large")
			return
		}
		r.c.malformed.Add(1)
		writeStatus(w, ct, http.StatusBadRequest, 3, "malformed request body")
		return
	}
	batch, err := decode(buf.Bytes(), ct == ContentTypeJSON)
	if err != nil {
		r.c.malformed.Add(1)
		r.log.Debug("otlp: malformed request", "principal", principal, "content_type", ct)
		writeStatus(w, ct, http.StatusBadRequest, 3, "malformed ExportTraceServiceRequest")
		return
	}
	r.c.received.Add(uint64(batch.received))
	r.c.rejected.Add(uint64(batch.rejected))
	r.c.contentDropped.Add(uint64(batch.contentDropped))
	rejected, msg := batch.rejected, batch.firstReason
	if len(batch.records) > 0 {
		n, err := r.publish(principal, batch.records)
		r.c.accepted.Add(uint64(n))
		if err != nil {
			left := len(batch.records) - n
			r.c.backpressured.Add(uint64(left))
			if n == 0 {
				r.c.unavailable.Add(1)
				r.log.Debug("otlp: publisher refused request", "principal", principal, "err", err)
				w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
				writeStatus(w, ct, http.StatusServiceUnavailable, 14, "publisher unavailable: "+err.Error())
				return
			}
			rejected += left
			msg = fmt.Sprintf("%d spans not accepted: %v", left, err)
		}
	}
	writeResponse(w, ct, rejected, msg)
}

// publish publishes records in order and returns how many were accepted
// before the first refusal.
func (r *Receiver) publish(principal string, records [][]byte) (int, error) {
	for i, rec := range records {
		if err := r.cfg.Publisher.PublishRecord(principal, bus.RecordObservability, rec); err != nil {
			return i, err
		}
	}
	return len(records), nil
}

func (r *Receiver) putBuf(b *bytes.Buffer) {
	if b.Cap() > int(r.cfg.MaxBodyBytes) { // keep the pool to typical sizes
		return
	}
	b.Reset()
	r.bufs.Put(b)
}

// authenticate reads "Authorization: Bearer <token>".
func (r *Receiver) authenticate(req *http.Request) (string, bool) {
	h := req.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", false
	}
	return r.cfg.Auth.Principal(tok)
}

// readBody reads the body into buf within the compressed and decompressed
// limits.
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request, gz bool, buf *bytes.Buffer) error {
	if req.ContentLength > r.cfg.MaxBodyBytes {
		return ErrTooLarge
	}
	body := http.MaxBytesReader(w, req.Body, r.cfg.MaxBodyBytes)
	if !gz {
		if _, err := buf.ReadFrom(body); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return ErrTooLarge
			}
			return fmt.Errorf("%w: read body", ErrMalformed)
		}
		return nil
	}
	zr, err := gzip.NewReader(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return ErrTooLarge
		}
		return fmt.Errorf("%w: gzip", ErrMalformed)
	}
	defer func() { _ = zr.Close() }()
	n, err := buf.ReadFrom(io.LimitReader(zr, r.cfg.MaxDecodedBytes+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), n > r.cfg.MaxDecodedBytes:
		return ErrTooLarge
	case err != nil:
		return fmt.Errorf("%w: gzip", ErrMalformed)
	}
	return nil
}

// contentType returns the accepted media type of the request, or "".
func contentType(req *http.Request) string {
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	switch mt {
	case ContentTypeProtobuf, "application/protobuf":
		return ContentTypeProtobuf
	case ContentTypeJSON:
		return ContentTypeJSON
	}
	return ""
}

// writeResponse writes 200 with an ExportTraceServiceResponse.
func writeResponse(w http.ResponseWriter, ct string, rejected int, msg string) {
	var ps otlpwire.PartialSuccess
	if rejected > 0 {
		ps = otlpwire.PartialSuccess{Rejected: int64(rejected), ErrorMessage: msg}
	}
	var b []byte
	if ct == ContentTypeJSON {
		b = otlpwire.AppendResponseJSON(nil, otlpwire.Traces, ps)
	} else {
		b = otlpwire.AppendResponseProto(nil, ps)
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// writeStatus writes an error with a google.rpc.Status body (code, message)
// in the request's content type; protobuf when the type is unknown.
func writeStatus(w http.ResponseWriter, ct string, httpCode int, rpcCode int32, msg string) {
	var b []byte
	if ct == ContentTypeJSON {
		b, _ = json.Marshal(struct {
			Code    int32  `json:"code"`
			Message string `json:"message"`
		}{rpcCode, msg})
	} else {
		ct = ContentTypeProtobuf
		b = appendStatusProto(nil, rpcCode, msg)
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(httpCode)
	_, _ = w.Write(b)
}

// appendStatusProto encodes google.rpc.Status{code: 1, message: 2}.
func appendStatusProto(b []byte, code int32, msg string) []byte {
	b = append(b, 0x08)
	b = appendVarint(b, uint64(code))
	b = append(b, 0x12)
	b = appendVarint(b, uint64(len(msg)))
	return append(b, msg...)
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
