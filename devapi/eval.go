package devapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
)

// Paths of the evaluation routes.
const (
	PathRender    = "/dev/v1/evaluation/render"
	PathCompare   = "/dev/v1/evaluation/compare"
	PathJobs      = "/dev/v1/evaluation/jobs"
	PathJob       = "/dev/v1/evaluation/jobs/{job_id}"
	PathJobResult = "/dev/v1/evaluation/jobs/{job_id}/result"
	PathJobReport = "/dev/v1/evaluation/jobs/{job_id}/report"
	PathJobEvents = "/dev/v1/evaluation/jobs/{job_id}/events"
	PathSets      = "/dev/v1/evaluation/sets"
	PathSet       = "/dev/v1/evaluation/sets/{set_id}/{version}"
	PathBaseline  = "/dev/v1/evaluation/baselines/{name}"
	PathBaselines = "/dev/v1/evaluation/baselines"
	PathPrune     = "/dev/v1/evaluation/prune"
	PathTraces    = "/dev/v1/traces"
	PathCluster   = "/dev/v1/cluster"
	PathOpenAPI   = "/dev/v1/openapi.json"
	PathHealthz   = "/healthz"
	PathReadyz    = "/readyz"
)

// MaxSubmitMetrics bounds the metrics of a submitted job (CONTRACTS §7).
const MaxSubmitMetrics = 16

// FirstPartyMetrics are the metric names a JSON submission may use: the
// built-in metrics and the deterministic built-in criteria. Nothing that
// names a provider, a module or code.
var FirstPartyMetrics = []string{
	evalengine.MetricLatency, evalengine.MetricCost, evalengine.MetricSafety, evalengine.MetricSemanticQuality,
	evalengine.CriterionExactResponse, evalengine.CriterionTrajectoryExact, evalengine.CriterionTrajectoryInOrder,
	evalengine.CriterionTrajectoryAnyOrder, evalengine.CriterionTrajectorySubset, evalengine.CriterionToolTrajectory,
}

// validJobID reports whether id is a job id as the coordinator makes
// them: "eval-" and 32 lowercase hex digits. A loop rather than a regexp:
// a package-level pattern is compiled at every adk start, eval runs
// included (TestValidJobID holds it to ^eval-[0-9a-f]{32}$).
func validJobID(id string) bool {
	h, ok := strings.CutPrefix(id, "eval-")
	if !ok || len(h) != 32 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (s *Server) routeTable() []*route {
	scoped := []string{"scope"}
	paged := []string{"scope", "limit", "cursor"}
	return []*route{
		newRoute(PathRender, map[string]op{http.MethodPost: {h: s.render}}),
		newRoute(PathCompare, map[string]op{http.MethodPost: {query: scoped, h: s.compare}}),
		newRoute(PathStats, map[string]op{http.MethodPost: {query: scoped, h: s.stats}}),
		newRoute(PathJobs, map[string]op{http.MethodGet: {query: paged, h: s.listJobs}, http.MethodPost: {query: scoped, h: s.submit}}),
		newRoute(PathJob, map[string]op{http.MethodGet: {query: scoped, h: s.status}, http.MethodDelete: {query: scoped, h: s.cancel}}),
		newRoute(PathJobResult, map[string]op{http.MethodGet: {query: scoped, h: s.result}}),
		newRoute(PathJobReport, map[string]op{http.MethodGet: {query: []string{"scope", "format", "suite_name", "max_bytes"}, h: s.report}}),
		newRoute(PathJobCases, map[string]op{http.MethodGet: {query: []string{"scope", "offset", "limit", "order"}, h: s.jobCases}}),
		newRoute(PathJobCase, map[string]op{http.MethodGet: {query: []string{"scope", "offset", "limit"}, h: s.jobCase}}),
		newRoute(PathJobEvents, map[string]op{http.MethodGet: {query: scoped, h: s.events}}),
		newRoute(PathSets, map[string]op{http.MethodGet: {query: paged, h: s.listSets}}),
		newRoute(PathSet, map[string]op{http.MethodGet: {query: scoped, h: s.getSet}}),
		newRoute(PathBaseline, map[string]op{http.MethodGet: {query: scoped, h: s.getBaseline}, http.MethodPut: {query: scoped, h: s.putBaseline}}),
		newRoute(PathBaselines, map[string]op{http.MethodGet: {query: paged, h: s.listBaselines}}),
		newRoute(PathPrune, map[string]op{http.MethodPost: {query: scoped, h: s.prune}}),
		newRoute(PathTraces, map[string]op{http.MethodGet: {query: traceQueryKeys(), h: s.traces}}),
		newRoute(PathCluster, map[string]op{http.MethodGet: {h: s.cluster}}),
		newRoute(PathOpenAPI, map[string]op{http.MethodGet: {public: true, h: s.openAPI}}),
		newRoute(PathHealthz, map[string]op{http.MethodGet: {public: true, h: s.healthz}}),
		newRoute(PathReadyz, map[string]op{http.MethodGet: {public: true, h: s.readyz}}),
	}
}

func (s *Server) coord() (*client.Client, *Error) {
	if s.o.Coord == nil {
		return nil, errorf(http.StatusServiceUnavailable, CodeEvaluationUnconfigured, "this server has no eval coordinator")
	}
	return s.o.Coord, nil
}

// evalCall resolves the scope and the coordinator client of a call.
func (s *Server) evalCall(c *call) (*client.Client, string, *Error) {
	scope, e := c.scope()
	if e != nil {
		return nil, "", e
	}
	cl, e := s.coord()
	if e != nil {
		return nil, "", e
	}
	return cl, scope, nil
}

// jobCall resolves the scope, the coordinator client and the job_id of a
// call on one job, the start every job route shares.
func (s *Server) jobCall(c *call) (*client.Client, string, string, *Error) {
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return nil, "", "", e
	}
	id, e := c.jobID()
	if e != nil {
		return nil, "", "", e
	}
	return cl, scope, id, nil
}

func (c *call) jobID() (string, *Error) {
	id := c.params["job_id"]
	if !validJobID(id) {
		return "", errorf(http.StatusBadRequest, CodeInvalidPathParameter, "job_id must be \"eval-\" and 32 lowercase hex digits").
			with(map[string]string{"parameter": "job_id"})
	}
	return id, nil
}

// HeaderIdempotencyKey names a submission (POST .../jobs) across the
// caller's own retries: it is the coordinator's submit request id
// (coordinator/DESIGN.md "Request path"), so a retry with the same key
// and the same body answers the job the first attempt created, within an
// hour, in the call's scope. On a cancel (DELETE .../jobs/{job_id}) it
// makes a job already cancelled by a user answer 202, as the first
// attempt did, instead of 409. Other routes ignore it.
const HeaderIdempotencyKey = "Idempotency-Key"

// idempotencyKeyValid says what HeaderIdempotencyKey takes.
var idempotencyKeyValid = "one value of " + strconv.Itoa(evalrecord.MinRequestIDBytes) + ".." +
	strconv.Itoa(evalrecord.MaxRequestIDBytes) + " bytes of [A-Za-z0-9_-] (a UUID works), optionally in double quotes"

// idempotencyKey returns the call's Idempotency-Key ("" without one). A
// structured-field string ("...", as the IETF draft sends it) is taken
// without its quotes. A bad value is a 400 naming the header and what it
// takes; the value is never repeated.
func (c *call) idempotencyKey() (string, *Error) {
	vs := c.r.Header.Values(HeaderIdempotencyKey)
	if len(vs) == 0 {
		return "", nil
	}
	key := vs[0]
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if len(vs) == 1 && evalrecord.ValidRequestID(key) {
		return key, nil
	}
	got := strconv.Itoa(len(vs[0])) + " bytes"
	if len(vs) > 1 {
		got = strconv.Itoa(len(vs)) + " values"
	}
	return "", errorf(http.StatusBadRequest, CodeInvalidRequest, HeaderIdempotencyKey+" header: want "+idempotencyKeyValid+"; got "+got).
		with(map[string]string{"header": HeaderIdempotencyKey, "valid": idempotencyKeyValid})
}

func (c *call) textParam(name string) (string, *Error) {
	v := c.params[name]
	if v == "" || len(v) > MaxPathParamBytes || !utf8.ValidString(v) {
		return "", errorf(http.StatusBadRequest, CodeInvalidPathParameter, name+" must be 1.."+strconv.Itoa(MaxPathParamBytes)+" bytes of UTF-8").
			with(map[string]string{"parameter": name})
	}
	return v, nil
}

func (s *Server) listJobs(w http.ResponseWriter, c *call) *Error {
	return listPage(s, w, c, (*client.Client).ListJobs)
}

// listPage answers a paged list of the call's scope: limit 1..1000 (0 is
// the coordinator's default) and an opaque cursor.
func listPage[T any](s *Server, w http.ResponseWriter, c *call,
	list func(*client.Client, context.Context, string, int, string) (*evalrecord.Page[T], error)) *Error {
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return e
	}
	limit, e := queryInt(c.query, "limit", 0, 1, 1000)
	if e != nil {
		return e
	}
	page, err := list(cl, c.r.Context(), scope, int(limit), c.query["cursor"])
	if err != nil {
		return serviceError(err)
	}
	return s.writeJSON(w, http.StatusOK, page)
}

// SubmitBody is the body of POST /dev/v1/evaluation/jobs.
type SubmitBody struct {
	AgentName string          `json:"agent_name"`
	Set       json.RawMessage `json:"set"`
	Metrics   []SubmitMetric  `json:"metrics,omitempty"`
	Options   json.RawMessage `json:"options,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// SubmitMetric is one first-party metric of a submission.
type SubmitMetric struct {
	ID        string          `json:"id"`
	Metric    string          `json:"metric"`
	Threshold *json.Number    `json:"threshold,omitempty"`
	Scope     string          `json:"scope,omitempty"`
	Config    json.RawMessage `json:"config,omitempty"`
}

// criterionEntry is a criteria-file entry (evalengine.ParseCriteria).
type criterionEntry struct {
	ID        string          `json:"id"`
	Criterion string          `json:"criterion"`
	Threshold *json.Number    `json:"threshold,omitempty"`
	Scope     string          `json:"scope"`
	Config    json.RawMessage `json:"config,omitempty"`
}

// parseSubmit validates a submission body and turns it into the
// coordinator's request. Exported for the fuzz test through FuzzSubmitBody.
func parseSubmit(data []byte) (*api.SubmitRequest, *Error) {
	var b SubmitBody
	if e := decodeBody(data, &b, CodeInvalidRequest); e != nil {
		return nil, e
	}
	bad := func(field, msg string) *Error {
		return errorf(http.StatusBadRequest, CodeInvalidRequest, field+": "+msg).with(map[string]string{"field": field})
	}
	if b.AgentName == "" || len(b.AgentName) > 256 {
		return nil, bad("agent_name", "required, 1..256 bytes (an agent the workers are configured with)")
	}
	if !isObject(b.Set) {
		return nil, bad("set", "required, an eval set JSON object")
	}
	if b.Options != nil && !isObject(b.Options) {
		return nil, bad("options", "must be a JSON object of run options")
	}
	if b.Metadata != nil && !isObject(b.Metadata) {
		return nil, bad("metadata", "must be a JSON object")
	}
	req := &api.SubmitRequest{Set: b.Set, Agent: b.AgentName, Options: b.Options, Metadata: b.Metadata}
	if b.Metrics != nil {
		if len(b.Metrics) < 1 || len(b.Metrics) > MaxSubmitMetrics {
			return nil, bad("metrics", "1.."+strconv.Itoa(MaxSubmitMetrics)+" metrics (omit it for the default exact_response criterion)")
		}
		entries := make([]criterionEntry, 0, len(b.Metrics))
		for i, m := range b.Metrics {
			field := "metrics[" + strconv.Itoa(i) + "]"
			if !isAllowed(m.Metric, FirstPartyMetrics) {
				return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, field+".metric: "+strconv.Quote(m.Metric)+" is not a first-party metric").
					with(map[string]any{"field": field + ".metric", "valid": FirstPartyMetrics})
			}
			scope := m.Scope
			if scope == "" {
				scope = "case"
			}
			if scope != "case" && scope != "turn" {
				return nil, bad(field+".scope", "must be turn or case")
			}
			if m.Config != nil && !isObject(m.Config) {
				return nil, bad(field+".config", "must be a JSON object")
			}
			entries = append(entries, criterionEntry{ID: m.ID, Criterion: m.Metric, Threshold: m.Threshold, Scope: scope, Config: m.Config})
		}
		crit, err := json.Marshal(entries)
		if err != nil {
			return nil, bad("metrics", "cannot be encoded")
		}
		if _, err := evalengine.ParseCriteria(crit); err != nil {
			return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "metrics: "+err.Error()).
				with(map[string]string{"field": "metrics", "reason": evalengine.ErrorCode(err)})
		}
		req.Criteria = crit
	}
	return req, nil
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

func (s *Server) submit(w http.ResponseWriter, c *call) *Error {
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return e
	}
	key, e := c.idempotencyKey()
	if e != nil {
		return e
	}
	data, e := readBody(c.r)
	if e != nil {
		return e
	}
	req, e := parseSubmit(data)
	if e != nil {
		return e
	}
	if len(s.o.Agents) > 0 && !isAllowed(req.Agent, s.o.Agents) {
		return errorf(http.StatusNotFound, CodeAgentNotFound, "agent_name "+strconv.Quote(req.Agent)+" is not an agent of this cluster").
			with(map[string]any{"field": "agent_name", "valid": s.o.Agents})
	}
	// The caller's key names the submit across its own retries; without
	// one the client draws a random id per call (its own repeats only).
	req.RequestID = key
	job, err := cl.Submit(c.r.Context(), scope, *req)
	if err != nil {
		if key != "" && api.AsError(err).Code == evalrecord.CodeRequestIDConflict {
			return errorf(http.StatusUnprocessableEntity, CodeIdempotencyKeyReused, HeaderIdempotencyKey+
				" was used in this scope within the last hour for a submission with other content; send a new key for a new submission").
				with(map[string]string{"header": HeaderIdempotencyKey, "reason": evalrecord.CodeRequestIDConflict})
		}
		return serviceError(err)
	}
	w.Header().Set("location", "/dev/v1/evaluation/jobs/"+job.JobID)
	return s.writeJSON(w, http.StatusAccepted, job)
}

func (s *Server) status(w http.ResponseWriter, c *call) *Error {
	cl, scope, id, e := s.jobCall(c)
	if e != nil {
		return e
	}
	job, err := cl.Status(c.r.Context(), scope, id)
	if err != nil {
		return serviceError(err)
	}
	return s.writeJSON(w, http.StatusOK, job)
}

// CancelAnswer is the 202 body of DELETE /dev/v1/evaluation/jobs/{job_id}.
type CancelAnswer struct {
	JobID  string `json:"job_id"`
	Status string `json:"status"`
}

func (s *Server) cancel(w http.ResponseWriter, c *call) *Error {
	cl, scope, id, e := s.jobCall(c)
	if e != nil {
		return e
	}
	key, e := c.idempotencyKey()
	if e != nil {
		return e
	}
	if _, err := cl.Cancel(c.r.Context(), scope, id); err != nil {
		// With a key the caller says it may be sending this cancel again:
		// a job a user's cancel already ended answers as the first
		// attempt did (the end state is the one asked for).
		ae := api.AsError(err)
		if key == "" || ae.Code != api.CodeAlreadyTerminal || ae.Phase != string(evalrecord.PhaseCancelled) ||
			ae.Reason != evalrecord.ReasonUserCancelled {
			return serviceError(err)
		}
	}
	return s.writeJSON(w, http.StatusAccepted, CancelAnswer{JobID: id, Status: "cancellation_requested"})
}

func (s *Server) result(w http.ResponseWriter, c *call) *Error {
	cl, scope, id, e := s.jobCall(c)
	if e != nil {
		return e
	}
	doc, err := cl.Result(c.r.Context(), scope, id)
	if tooLargeForDocument(err) {
		return errorf(http.StatusRequestEntityTooLarge, CodeResponseTooLarge,
			"the result's samples are over one 16 MiB document: GET /dev/v1/evaluation/jobs/"+id+"/report?format=jsonl sends its JSON Lines form, format=markdown, junit, sarif, annotations or html its report").
			with(map[string]any{"reason": evalengine.CodeReportTooLarge, "route": PathJobReport + "?format=jsonl"})
	}
	if err != nil {
		return serviceError(err)
	}
	if len(doc) > MaxResponseBytes {
		return errorf(http.StatusRequestEntityTooLarge, CodeResponseTooLarge,
			"the result has "+strconv.Itoa(len(doc))+" bytes, more than 1 MiB: GET "+"/dev/v1/evaluation/jobs/"+id+"/report?format=json sends it (up to 16 MiB)").
			with(map[string]any{"bytes": len(doc), "max_bytes": MaxResponseBytes})
	}
	return s.writeRaw(w, http.StatusOK, "application/json; charset=utf-8", doc, MaxResponseBytes)
}

// ContentType is the content type of a report format.
func ContentType(format string) string {
	switch format {
	case evalengine.FormatMarkdown:
		return "text/markdown; charset=utf-8"
	case evalengine.FormatJUnit:
		return "application/xml; charset=utf-8"
	case evalengine.FormatHTML:
		// The self-contained report (issue 15); the UI downloads it, it
		// carries its own CSP and no script.
		return "text/html; charset=utf-8"
	case evalengine.FormatJSONL:
		return ContentTypeJSONL
	}
	return "application/json; charset=utf-8"
}

// RenderStoredResult renders a job's stored result document: the path
// from a result to report bytes that the HTTP route and the Go caller
// (JobReport) share. `adk eval report JOB_ID` makes the same two calls
// (evalengine.DecodeResult, then evalengine.Render) itself, and the
// report-parity tests check that all three give the same bytes.
func RenderStoredResult(doc []byte, format string, opts evalengine.ExportOptions) ([]byte, error) {
	r, err := evalengine.DecodeResult(doc)
	if err != nil {
		return nil, err
	}
	return evalengine.Render(r, format, opts)
}

// JobReport fetches a completed job's result through the coordinator
// client and renders it (RenderStoredResult).
func JobReport(ctx context.Context, cl *client.Client, scope, jobID, format string, opts evalengine.ExportOptions) ([]byte, error) {
	doc, err := cl.Result(ctx, scope, jobID)
	if err != nil {
		return nil, err
	}
	return RenderStoredResult(doc, format, opts)
}

func (s *Server) report(w http.ResponseWriter, c *call) *Error {
	cl, scope, id, e := s.jobCall(c)
	if e != nil {
		return e
	}
	format := c.query["format"]
	if format == "" {
		format = evalengine.FormatJSON
	}
	if !isAllowed(format, evalengine.Formats()) {
		return errorf(http.StatusBadRequest, CodeInvalidQuery, "format must be one of json, markdown, junit, sarif, annotations").
			with(map[string]any{"parameter": "format", "valid": evalengine.Formats()})
	}
	suite, hasSuite := c.query["suite_name"]
	if hasSuite && (suite == "" || len(suite) > evalengine.MaxSuiteNameBytes) {
		return errorf(http.StatusBadRequest, CodeInvalidQuery, "suite_name must be 1..256 bytes of UTF-8").with(map[string]string{"parameter": "suite_name"})
	}
	limit, e := queryInt(c.query, "max_bytes", int64(s.o.MaxReportBytes), 1, int64(s.o.MaxReportBytes))
	if e != nil {
		return e
	}
	opts := evalengine.ExportOptions{SuiteName: suite, MaxBytes: int(limit)}
	// A report from the stream is unbounded only at the default ceiling:
	// max_bytes, or an operator's lower MaxReportBytes, bounds it too.
	_, bounded := c.query["max_bytes"]
	bounded = bounded || s.o.MaxReportBytes < MaxReportBytes
	doc, err := cl.Result(c.r.Context(), scope, id)
	if tooLargeForDocument(err) {
		// Its samples are over one document: from its stream
		// (DESIGN.md "Stored results of any size").
		return s.streamedReport(c.r.Context(), w, cl, scope, id, format, opts, bounded, nil)
	}
	if err != nil {
		return serviceError(err)
	}
	out, err := RenderStoredResult(doc, format, opts)
	if err != nil {
		var ee *evalengine.Error
		if errors.As(err, &ee) {
			if ee.Code == evalengine.CodeExportByteLimitExceeded {
				tooBig := errorf(http.StatusRequestEntityTooLarge, CodeResponseTooLarge, "the report is larger than "+strconv.FormatInt(limit, 10)+" bytes").
					with(map[string]any{"max_bytes": limit, "reason": ee.Code})
				if bounded || format == evalengine.FormatJSON {
					return tooBig
				}
				// The result fits one document but its report does not
				// (an html page of a ~12 MiB result): from its stream, as
				// a result past one document; a job without a stream
				// keeps the 413.
				return s.streamedReport(c.r.Context(), w, cl, scope, id, format, opts, false, tooBig)
			}
			return errorf(http.StatusBadRequest, CodeInvalidReport, err.Error()).with(map[string]string{"reason": ee.Code})
		}
		return serviceError(err)
	}
	return s.writeRaw(w, http.StatusOK, ContentType(format), out, int(limit))
}

func (s *Server) listSets(w http.ResponseWriter, c *call) *Error {
	return listPage(s, w, c, (*client.Client).ListSets)
}

// SetAnswer is GET /dev/v1/evaluation/sets/{set_id}/{version}: the set
// row and its canonical body.
type SetAnswer struct {
	evalrecord.SetRecord
	Set json.RawMessage `json:"set"`
}

func (s *Server) getSet(w http.ResponseWriter, c *call) *Error {
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return e
	}
	id, e := c.textParam("set_id")
	if e != nil {
		return e
	}
	version, e := c.textParam("version")
	if e != nil {
		return e
	}
	rec, err := cl.GetSet(c.r.Context(), scope, id, version)
	if err != nil {
		return serviceError(err)
	}
	return s.writeJSON(w, http.StatusOK, SetAnswer{SetRecord: *rec, Set: rec.Body})
}

// BaselineAnswer is a baseline row with its stored result.
type BaselineAnswer struct {
	evalrecord.Baseline
	Result json.RawMessage `json:"result"`
}

func (s *Server) getBaseline(w http.ResponseWriter, c *call) *Error {
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return e
	}
	name, e := c.textParam("name")
	if e != nil {
		return e
	}
	b, err := cl.GetBaseline(c.r.Context(), scope, name)
	if err != nil {
		return serviceError(err)
	}
	return s.writeJSON(w, http.StatusOK, BaselineAnswer{Baseline: *b, Result: b.Result})
}

// PutBaselineBody is the body of PUT /dev/v1/evaluation/baselines/{name}.
type PutBaselineBody struct {
	JobID string `json:"job_id"`
}

func (s *Server) putBaseline(w http.ResponseWriter, c *call) *Error {
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return e
	}
	name, e := c.textParam("name")
	if e != nil {
		return e
	}
	data, e := readBody(c.r)
	if e != nil {
		return e
	}
	var body PutBaselineBody
	if e := decodeBody(data, &body, CodeInvalidRequest); e != nil {
		return e
	}
	if !validJobID(body.JobID) {
		return errorf(http.StatusBadRequest, CodeInvalidRequest, "job_id must be \"eval-\" and 32 lowercase hex digits").with(map[string]string{"field": "job_id"})
	}
	b, err := cl.PutBaseline(c.r.Context(), scope, name, body.JobID)
	if err != nil {
		return serviceError(err)
	}
	return s.writeJSON(w, http.StatusOK, BaselineAnswer{Baseline: *b, Result: b.Result})
}

// listBaselines answers a page of the scope's baselines by name, rows
// without their results (GET .../baselines/{name} reads one with it).
func (s *Server) listBaselines(w http.ResponseWriter, c *call) *Error {
	return listPage(s, w, c, (*client.Client).ListBaselines)
}

// PruneBody is the body of POST /dev/v1/evaluation/prune: `adk eval
// prune` over HTTP. Exactly one of Before (RFC 3339) and OlderThan (a Go
// duration, e.g. "720h") says what is old; Limit, Cursor and
// IncludeBaselines are the store's (limit 0 = its default page).
type PruneBody struct {
	Before           string `json:"before,omitempty"`
	OlderThan        string `json:"older_than,omitempty"`
	Limit            int    `json:"limit,omitempty"`
	Cursor           string `json:"cursor,omitempty"`
	IncludeBaselines bool   `json:"include_baselines,omitempty"`
}

// CodeInvalidPruneBefore is details.reason when before/older_than is
// missing, doubled or not a time (the CLI's error code for the same).
const CodeInvalidPruneBefore = "invalid_prune_before"

// MaxPruneLimit bounds PruneBody.Limit (the store refuses more than its
// configured maximum, at most this).
const MaxPruneLimit = 10_000

// parsePrune turns a prune body into the store's options, now being the
// time older_than counts back from.
func parsePrune(data []byte, now time.Time) (*evalrecord.PruneOptions, *Error) {
	var b PruneBody
	if e := decodeBody(data, &b, CodeInvalidRequest); e != nil {
		return nil, e
	}
	bad := func(field, msg string) *Error {
		return errorf(http.StatusBadRequest, CodeInvalidRequest, field+": "+msg).
			with(map[string]string{"field": field, "reason": CodeInvalidPruneBefore})
	}
	o := &evalrecord.PruneOptions{Limit: b.Limit, Cursor: b.Cursor, IncludeBaselines: b.IncludeBaselines}
	switch {
	case (b.Before == "") == (b.OlderThan == ""):
		return nil, bad("before", "give exactly one of before (RFC 3339) and older_than (e.g. 720h)")
	case b.OlderThan != "":
		d, err := time.ParseDuration(b.OlderThan)
		if err != nil || d <= 0 {
			return nil, bad("older_than", "must be a positive duration, e.g. 720h")
		}
		if o.Before = now.Add(-d).UnixMilli(); o.Before <= 0 {
			return nil, bad("older_than", "must reach back no further than 1970, e.g. 720h")
		}
	default:
		t, err := time.Parse(time.RFC3339, b.Before)
		if err != nil || t.UnixMilli() <= 0 {
			return nil, bad("before", "want RFC 3339 after 1970, e.g. 2026-01-02T15:04:05Z")
		}
		o.Before = t.UnixMilli()
	}
	if b.Limit < 0 || b.Limit > MaxPruneLimit {
		return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "limit: 0.."+strconv.Itoa(MaxPruneLimit)+" (0: the store's default page)").
			with(map[string]string{"field": "limit"})
	}
	if len(b.Cursor) > MaxQueryValueBytes*2 {
		return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "cursor: at most "+strconv.Itoa(MaxQueryValueBytes*2)+" bytes").
			with(map[string]string{"field": "cursor"})
	}
	return o, nil
}

// prune deletes old, unprotected records of the call's scope (one page):
// 200 with the store's PruneResult; next_cursor/has_more continue it.
func (s *Server) prune(w http.ResponseWriter, c *call) *Error {
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return e
	}
	data, e := readBody(c.r)
	if e != nil {
		return e
	}
	opts, e := parsePrune(data, time.Now())
	if e != nil {
		return e
	}
	res, err := cl.Prune(c.r.Context(), scope, *opts)
	if err != nil {
		return serviceError(err)
	}
	return s.writeJSON(w, http.StatusOK, res)
}
