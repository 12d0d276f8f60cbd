package devapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Realm is the bearer realm named in www-authenticate.
const Realm = "adk"

// Options configure a Server.
type Options struct {
	// Tokens authenticate every /dev/v1 route (required): the same tokens
	// file the trace query service reads, with each principal's eval
	// scopes.
	Tokens *tracenode.Tokens
	// Coord calls the coordinator service; nil answers the evaluation
	// routes with 503 developer_evaluation_unavailable.
	Coord *client.Client
	// NATS carries trace queries and the cluster view; nil answers those
	// routes with 503 developer_api_unavailable.
	NATS *nats.Conn
	// UI, when set, is mounted at / on the same listener (the /dev/v1
	// routes, /healthz and /readyz keep precedence).
	UI http.Handler
	// MaxReportBytes lowers the report ceiling (default and maximum 16 MiB).
	MaxReportBytes int
	// ReportSpoolBytes bounds the temporary disk that the reports of
	// results rendered from their streams hold together (each spools its
	// job's stream for the request's life): a report that would pass it
	// is 429 evaluation_capacity_reached (details.reason
	// report_spool_full, retry-after), or 503 report_spool_limit when its
	// stream alone is larger. 0 is DefaultReportSpoolBytes; at least
	// MinReportSpoolBytes.
	ReportSpoolBytes int64
	// Ready answers /readyz (nil: ready whenever the process is up).
	Ready func(ctx context.Context) error
	// Registerer receives the API's metrics (nil: none).
	Registerer prometheus.Registerer
	// EventInterval is how often a job's event stream polls its status
	// (default 250 ms); EventHeartbeat how often an idle stream sends a
	// comment (default 15 s).
	EventInterval, EventHeartbeat time.Duration
	// Agents, when set, are the agent names a submission may use (the
	// workers' trusted agents); another name is 404
	// evaluation_agent_not_found before anything reaches the coordinator.
	Agents []string
	// AllowedOrigins are origins (scheme://host[:port]) besides the
	// server's own from which a browser may write.
	AllowedOrigins []string
	// Logger receives a line per answered request: at debug, or at warn
	// for a 5xx (the API or the cluster behind it failed). A line names
	// the route template, method, status, duration and error code, never
	// the path, query, token or body, so no id or secret reaches the log
	// (nil: no log).
	Logger *slog.Logger
}

// Server is the developer HTTP API. It holds no state between requests
// beyond the shared pollers of open event streams.
type Server struct {
	o       Options
	log     *slog.Logger
	routes  []*route
	metrics *apiMetrics
	watches *watchHub
	spool   *spoolBudget
	handler http.Handler
	// streamRead is the bytes of stored result streams read so far
	// (compare sides, stats, cases pages, case pages).
	streamRead atomic.Int64
}

// New validates o and builds the server.
func New(o Options) (*Server, error) {
	if o.Tokens == nil {
		return nil, errorf(0, CodeAPIUnavailable, "devapi: Options.Tokens is required")
	}
	if o.MaxReportBytes == 0 {
		o.MaxReportBytes = MaxReportBytes
	}
	if o.MaxReportBytes < 1 || o.MaxReportBytes > MaxReportBytes {
		return nil, errorf(0, CodeInvalidRequest, "devapi: MaxReportBytes must be 1.."+strconv.Itoa(MaxReportBytes))
	}
	if o.ReportSpoolBytes == 0 {
		o.ReportSpoolBytes = DefaultReportSpoolBytes
	}
	if o.ReportSpoolBytes < MinReportSpoolBytes || o.ReportSpoolBytes > MaxReportSpoolBytes {
		return nil, errorf(0, CodeInvalidRequest, "devapi: ReportSpoolBytes must be "+strconv.FormatInt(MinReportSpoolBytes, 10)+".."+strconv.FormatInt(MaxReportSpoolBytes, 10))
	}
	if o.EventInterval <= 0 {
		o.EventInterval = 250 * time.Millisecond
	}
	if o.EventHeartbeat <= 0 {
		o.EventHeartbeat = 15 * time.Second
	}
	for _, origin := range o.AllowedOrigins {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
			return nil, errorf(0, CodeInvalidRequest, "devapi: allowed origin "+strconv.Quote(origin)+" is not scheme://host[:port]")
		}
	}
	s := &Server{o: o, log: o.Logger, spool: &spoolBudget{limit: o.ReportSpoolBytes}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	m, err := newAPIMetrics(o.Registerer, s.spool, &s.streamRead)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.watches = newWatchHub(s)
	s.routes = s.routeTable()
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s, nil
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Close ends every open event stream and stops their pollers.
func (s *Server) Close() { s.watches.close() }

// call is one authenticated request being answered.
type call struct {
	r      *http.Request
	id     tracenode.Identity
	token  string
	params map[string]string
	query  map[string]string
}

// handler answers one method of a route; it writes success itself and
// returns an *Error to have it written.
type handler func(w http.ResponseWriter, c *call) *Error

type op struct {
	query  []string // the query parameters the operation accepts
	public bool     // no token needed
	h      handler
}

type route struct {
	pattern string
	segs    []string
	ops     map[string]op
}

// Route is one documented route: its path template and methods.
type Route struct {
	Pattern string
	Methods []string
}

// Routes lists the routes the server answers (the OpenAPI test compares
// them with the document).
func (s *Server) Routes() []Route {
	out := make([]Route, 0, len(s.routes))
	for _, r := range s.routes {
		out = append(out, Route{Pattern: r.pattern, Methods: r.methods()})
	}
	return out
}

func (r *route) methods() []string {
	ms := make([]string, 0, len(r.ops))
	for m := range r.ops {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	return ms
}

func newRoute(pattern string, ops map[string]op) *route {
	return &route{pattern: pattern, segs: strings.Split(strings.Trim(pattern, "/"), "/"), ops: ops}
}

// match returns the path parameters when path matches the route.
func (r *route) match(path string) (map[string]string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) != len(r.segs) {
		return nil, false
	}
	var params map[string]string
	for i, want := range r.segs {
		if strings.HasPrefix(want, "{") {
			if params == nil {
				params = map[string]string{}
			}
			v, err := url.PathUnescape(segs[i])
			if err != nil || strings.ContainsRune(v, 0) {
				v = "" // refused by the parameter's check
			}
			params[strings.Trim(want, "{}")] = v
			continue
		}
		if segs[i] != want {
			return nil, false
		}
	}
	return params, true
}

// setSecurityHeaders sets the contract's headers on every answer.
func setSecurityHeaders(h http.Header) {
	h.Set("cache-control", "no-store")
	h.Set("x-content-type-options", "nosniff")
	h.Set("referrer-policy", "no-referrer")
	h.Set("x-frame-options", "DENY")
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	setSecurityHeaders(w.Header())
	rt, params := s.find(r.URL.EscapedPath())
	label := "ui"
	if rt != nil {
		label = rt.pattern
	}
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		d := time.Since(start)
		s.metrics.observe(label, r.Method, sw.status, d)
		s.logRequest(label, r.Method, sw, d)
	}()
	if rt == nil {
		if s.o.UI != nil && !strings.HasPrefix(r.URL.Path, "/dev/") {
			s.o.UI.ServeHTTP(sw, r)
			return
		}
		label = "unmatched"
		s.writeError(sw, errorf(http.StatusNotFound, CodeRouteNotFound, "no route "+strconv.Quote(r.URL.Path)))
		return
	}
	o, ok := rt.ops[r.Method]
	if !ok && r.Method == http.MethodHead {
		o, ok = rt.ops[http.MethodGet]
	}
	if !ok {
		e := errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed on "+rt.pattern)
		e.Header = map[string]string{"allow": strings.Join(rt.methods(), ", ")}
		s.writeError(sw, e.with(map[string]any{"allow": rt.methods()}))
		return
	}
	c := &call{r: r, params: params}
	if !o.public {
		if e := s.authenticate(c); e != nil {
			s.writeError(sw, e)
			return
		}
		if e := s.checkOrigin(r); e != nil {
			s.writeError(sw, e)
			return
		}
	}
	q, e := parseQuery(r.URL.RawQuery, o.query)
	if e != nil {
		if strings.HasPrefix(rt.pattern, "/dev/v1/traces") {
			e.Code = CodeInvalidTraceQuery
		}
		s.writeError(sw, e)
		return
	}
	c.query = q
	if e := o.h(sw, c); e != nil {
		s.writeError(sw, e)
	}
}

func (s *Server) find(path string) (*route, map[string]string) {
	for _, rt := range s.routes {
		if p, ok := rt.match(path); ok {
			return rt, p
		}
	}
	return nil, nil
}

// authenticate maps the bearer token to an identity: 401 with
// www-authenticate when it is missing or unknown.
func (s *Server) authenticate(c *call) *Error {
	h := c.r.Header.Get("authorization")
	scheme, tok, _ := strings.Cut(h, " ")
	if h == "" || !strings.EqualFold(scheme, "bearer") {
		e := errorf(http.StatusUnauthorized, CodeUnauthorized, "a bearer token is required")
		e.Header = map[string]string{"www-authenticate": `Bearer realm="` + Realm + `"`}
		return e
	}
	id, ok := s.o.Tokens.Lookup(strings.TrimSpace(tok))
	if !ok {
		e := errorf(http.StatusUnauthorized, CodeUnauthorized, "the bearer token is not valid")
		e.Header = map[string]string{"www-authenticate": `Bearer realm="` + Realm + `", error="invalid_token"`}
		return e
	}
	c.id, c.token = id, strings.TrimSpace(tok)
	return nil
}

// checkOrigin refuses a browser write from another origin: a request
// that carries Origin (or Sec-Fetch-Site) must come from this server's
// own origin or an allowed one. Reads are not checked: without CORS
// headers a cross-origin page cannot read the answer.
func (s *Server) checkOrigin(r *http.Request) *Error {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return nil
	}
	refuse := func(why string) *Error {
		return errorf(http.StatusForbidden, CodeForbidden, "cross-origin write refused: "+why).
			with(map[string]string{"reason": "cross_origin"})
	}
	if site := r.Header.Get("sec-fetch-site"); site == "cross-site" || site == "same-site" {
		if origin := r.Header.Get("origin"); origin == "" || !s.originAllowed(r, origin) {
			return refuse("sec-fetch-site " + site)
		}
	}
	origin := r.Header.Get("origin")
	if origin == "" {
		return nil
	}
	if !s.originAllowed(r, origin) {
		return refuse("origin " + strconv.Quote(origin) + " is not this server's")
	}
	return nil
}

func (s *Server) originAllowed(r *http.Request, origin string) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if strings.EqualFold(origin, scheme+"://"+r.Host) {
		return true
	}
	for _, a := range s.o.AllowedOrigins {
		if strings.EqualFold(origin, a) {
			return true
		}
	}
	return false
}

// scope is the eval scope a call acts in: ?scope= (which must be one of
// the principal's, else 403), or the principal's first scope.
func (c *call) scope() (string, *Error) {
	sc, ok := c.query["scope"]
	if !ok {
		return c.id.Scopes[0], nil
	}
	if !c.id.HasScope(sc) {
		return "", errorf(http.StatusForbidden, CodeForbidden, "scope "+strconv.Quote(sc)+" is not one of this token's").
			with(map[string]string{"scope": sc})
	}
	return sc, nil
}

func (s *Server) writeError(w http.ResponseWriter, e *Error) {
	if sw, ok := w.(*statusWriter); ok {
		sw.code = e.Code
	}
	for k, v := range e.Header {
		w.Header().Set(k, v)
	}
	if e.Status == 0 {
		e.Status = http.StatusInternalServerError
	}
	w.Header().Set("content-type", "application/json; charset=utf-8")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.body())
}

// writeJSON writes v as JSON with status, refusing more than
// MaxResponseBytes.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) *Error {
	b, err := json.Marshal(v)
	if err != nil {
		return errorf(http.StatusInternalServerError, "internal_error", "encoding the answer failed")
	}
	return s.writeRaw(w, status, "application/json; charset=utf-8", append(b, '\n'), MaxResponseBytes)
}

func (s *Server) writeRaw(w http.ResponseWriter, status int, contentType string, b []byte, limit int) *Error {
	if len(b) > limit {
		return errorf(http.StatusRequestEntityTooLarge, CodeResponseTooLarge,
			"the answer has "+strconv.Itoa(len(b))+" bytes, more than the "+strconv.Itoa(limit)+" this route may send").
			with(map[string]any{"bytes": len(b), "max_bytes": limit})
	}
	w.Header().Set("content-type", contentType)
	w.Header().Set("content-length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}

// spillWriter holds an answer of unknown size up to limit bytes, then
// sends it as writeRaw does (one body with its content-length, status
// 200); an answer past limit is sent as it is written instead, with
// status 200 and no content-length (chunked), so its size is bounded by
// its writer, not by memory.
type spillWriter struct {
	w           http.ResponseWriter
	contentType string
	limit       int
	buf         []byte
	streaming   bool
}

func (s *spillWriter) Write(p []byte) (int, error) {
	if !s.streaming {
		if len(s.buf)+len(p) <= s.limit {
			s.buf = append(s.buf, p...)
			return len(p), nil
		}
		s.streaming = true
		s.w.Header().Set("content-type", s.contentType)
		s.w.WriteHeader(http.StatusOK)
		if _, err := s.w.Write(s.buf); err != nil {
			return 0, err
		}
		s.buf = nil
	}
	return s.w.Write(p)
}

// finish sends a held answer (nothing to do for one already streaming).
func (s *spillWriter) finish(srv *Server) *Error {
	if s.streaming {
		return nil
	}
	return srv.writeRaw(s.w, http.StatusOK, s.contentType, s.buf, s.limit)
}

// statusWriter records the status for metrics and passes Flush through
// (event streams).
type statusWriter struct {
	http.ResponseWriter
	status int
	code   string // the error code written, for the request log
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// apiMetrics are the API's Prometheus series.
type apiMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	streams  prometheus.Gauge
}

func newAPIMetrics(reg prometheus.Registerer, spool *spoolBudget, streamRead *atomic.Int64) (*apiMetrics, error) {
	m := &apiMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "adk_devapi_requests_total",
			Help: "HTTP requests answered by the developer API, by route template, method and status code."}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "adk_devapi_request_duration_seconds",
			Help:    "Time to answer a developer API request (event streams: their whole life).",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"route"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "adk_devapi_event_streams",
			Help: "Job event streams open now."}),
	}
	spooled := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adk_devapi_report_spool_bytes",
		Help: "Temporary disk the reports rendered from result streams hold now (bounded by the report spool setting)."},
		func() float64 { return float64(spool.used.Load()) })
	read := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adk_devapi_result_stream_bytes_total",
		Help: "Bytes of stored result streams the API read from the coordinators (compare sides, stats, case pages)."},
		func() float64 { return float64(streamRead.Load()) })
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration, m.streams, spooled, read} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// knownMethod bounds a client-chosen method for metric labels and logs.
func knownMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions:
		return method
	}
	return "other"
}

// logRequest writes the request's log line (see Options.Logger).
func (s *Server) logRequest(route, method string, sw *statusWriter, d time.Duration) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	level := slog.LevelDebug
	if status >= http.StatusInternalServerError {
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("route", route), slog.String("method", knownMethod(method)),
		slog.Int("status", status), slog.Duration("duration", d)}
	if sw.code != "" {
		attrs = append(attrs, slog.String("code", sw.code))
	}
	s.log.LogAttrs(ctx, level, "devapi request", attrs...)
}

func (m *apiMetrics) observe(route, method string, status int, d time.Duration) {
	if status == 0 {
		status = http.StatusOK
	}
	m.requests.WithLabelValues(route, knownMethod(method), strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}
