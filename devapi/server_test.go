package devapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/tracenode"
)

const (
	tokAlice = "alice-token-0123456789"
	tokBob   = "bob-token-0123456789ab"
)

func testTokens() *tracenode.Tokens {
	return tracenode.NewTokenIdentities(map[string]tracenode.Identity{
		tokAlice: {Principal: "alice", Scopes: []string{"team-a", "shared"}},
		tokBob:   {Principal: "bob", Scopes: []string{"team-b"}},
	})
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) errCode() string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

func do(t testing.TB, base, method, path, token string, body []byte, hdr ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("content-type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func newServer(t testing.TB, o devapi.Options) (*devapi.Server, string) {
	t.Helper()
	if o.Tokens == nil {
		o.Tokens = testTokens()
	}
	s, err := devapi.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts.URL
}

func checkSecurityHeaders(t *testing.T, what string, a answer) {
	t.Helper()
	for k, v := range map[string]string{"cache-control": "no-store", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer"} {
		if got := a.header.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

// TestServer_AuthAndErrors: without a coordinator the server still
// authenticates, refuses bad queries and methods with the contract's
// codes, and sets the security headers on every answer.
func TestServer_AuthAndErrors(t *testing.T) {
	_, base := newServer(t, devapi.Options{})
	cases := []struct {
		name, method, path, token string
		body                      []byte
		hdr                       []string
		status                    int
		code                      string
	}{
		{"no token", "GET", "/dev/v1/evaluation/jobs", "", nil, nil, 401, devapi.CodeUnauthorized},
		{"bad token", "GET", "/dev/v1/evaluation/jobs", "not-a-token-at-all", nil, nil, 401, devapi.CodeUnauthorized},
		{"basic auth", "GET", "/dev/v1/evaluation/jobs", "", nil, []string{"authorization", "Basic YTpi"}, 401, devapi.CodeUnauthorized},
		{"unconfigured", "GET", "/dev/v1/evaluation/jobs", tokAlice, nil, nil, 503, devapi.CodeEvaluationUnconfigured},
		{"unknown query", "GET", "/dev/v1/evaluation/jobs?limt=3", tokAlice, nil, nil, 400, devapi.CodeInvalidQuery},
		{"duplicate query", "GET", "/dev/v1/evaluation/jobs?limit=3&limit=4", tokAlice, nil, nil, 400, devapi.CodeInvalidQuery},
		{"bad escape", "GET", "/dev/v1/evaluation/jobs?cursor=%zz", tokAlice, nil, nil, 400, devapi.CodeInvalidQuery},
		{"foreign scope", "GET", "/dev/v1/evaluation/jobs/eval-0123456789abcdef0123456789abcdef?scope=team-b", tokAlice, nil, nil, 403, devapi.CodeForbidden},
		{"method", "PATCH", "/dev/v1/evaluation/jobs", tokAlice, nil, nil, 405, devapi.CodeMethodNotAllowed},
		{"no route", "GET", "/dev/v1/nothing", tokAlice, nil, nil, 404, devapi.CodeRouteNotFound},
		{"cross origin", "POST", "/dev/v1/evaluation/render", tokAlice, []byte(`{}`), []string{"origin", "https://evil.example"}, 403, devapi.CodeForbidden},
		{"cross site", "POST", "/dev/v1/evaluation/render", tokAlice, []byte(`{}`), []string{"sec-fetch-site", "cross-site"}, 403, devapi.CodeForbidden},
		{"not json", "POST", "/dev/v1/evaluation/render", tokAlice, []byte(`{}`), []string{"content-type", "text/plain"}, 415, devapi.CodeUnsupportedMediaType},
		{"traces unconfigured", "GET", "/dev/v1/traces", tokAlice, nil, nil, 503, devapi.CodeAPIUnavailable},
		{"trace query", "GET", "/dev/v1/traces?span=1", tokAlice, nil, nil, 400, devapi.CodeInvalidTraceQuery},
	}
	for _, tc := range cases {
		a := do(t, base, tc.method, tc.path, tc.token, tc.body, tc.hdr...)
		if a.status != tc.status || a.errCode() != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, a.status, a.body, tc.status, tc.code)
		}
		checkSecurityHeaders(t, tc.name, a)
		if ct := a.header.Get("content-type"); ct != "application/json; charset=utf-8" {
			t.Errorf("%s: content-type %q", tc.name, ct)
		}
		switch tc.status {
		case 401:
			if !strings.HasPrefix(a.header.Get("www-authenticate"), `Bearer realm="adk"`) {
				t.Errorf("%s: www-authenticate %q", tc.name, a.header.Get("www-authenticate"))
			}
		case 405:
			if a.header.Get("allow") != "GET, POST" {
				t.Errorf("%s: allow %q", tc.name, a.header.Get("allow"))
			}
		}
	}
	// Same-origin writes pass the origin check (and reach the body check).
	a := do(t, base, "POST", "/dev/v1/evaluation/render", tokAlice, []byte(`{}`), "origin", base)
	if a.status != 400 || a.errCode() != devapi.CodeInvalidReport {
		t.Errorf("same origin: %d %s", a.status, a.body)
	}
	for _, p := range []string{"/healthz", "/readyz", "/dev/v1/openapi.json"} {
		a := do(t, base, "GET", p, "", nil)
		if a.status != 200 {
			t.Errorf("%s: %d %s", p, a.status, a.body)
		}
		checkSecurityHeaders(t, p, a)
	}
}

// TestServer_BodyBounds: a body of exactly 64 KiB is read (and judged on
// its content); one byte more is 413 before any decoding.
func TestServer_BodyBounds(t *testing.T) {
	_, base := newServer(t, devapi.Options{})
	mk := func(n int) []byte {
		prefix := []byte(`{"format":"json","report":{"pad":"`)
		suffix := []byte(`"}}`)
		pad := bytes.Repeat([]byte("x"), n-len(prefix)-len(suffix))
		return slices.Concat(prefix, pad, suffix)
	}
	a := do(t, base, "POST", "/dev/v1/evaluation/render", tokAlice, mk(devapi.MaxBodyBytes))
	if a.status != 400 || a.errCode() != devapi.CodeInvalidReport {
		t.Fatalf("exact limit: %d %s", a.status, a.body)
	}
	a = do(t, base, "POST", "/dev/v1/evaluation/render", tokAlice, mk(devapi.MaxBodyBytes+1))
	if a.status != 413 || a.errCode() != devapi.CodeBodyTooLarge {
		t.Fatalf("one over: %d %s", a.status, a.body)
	}
}

// TestServer_UIMounted: the UI handler answers outside /dev/, with the
// security headers; /dev/v1 keeps its own routes.
func TestServer_UIMounted(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ui:"+r.URL.Path) })
	_, base := newServer(t, devapi.Options{UI: ui})
	a := do(t, base, "GET", "/index.html", "", nil)
	if a.status != 200 || string(a.body) != "ui:/index.html" {
		t.Fatalf("ui: %d %s", a.status, a.body)
	}
	checkSecurityHeaders(t, "ui", a)
	if a := do(t, base, "GET", "/dev/v1/none", tokAlice, nil); a.status != 404 {
		t.Fatalf("dev route: %d", a.status)
	}
}

// TestOpenAPI_DocumentsEveryRoute: the checked-in OpenAPI document names
// exactly the routes and methods the server answers, and the server
// serves it.
func TestOpenAPI_DocumentsEveryRoute(t *testing.T) {
	s, base := newServer(t, devapi.Options{})
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(devapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	documented := map[string][]string{}
	for p, ops := range doc.Paths {
		for m := range ops {
			if m == "parameters" {
				continue
			}
			documented[p] = append(documented[p], strings.ToUpper(m))
		}
		sort.Strings(documented[p])
	}
	real := map[string][]string{}
	for _, r := range s.Routes() {
		real[r.Pattern] = r.Methods
	}
	for p, ms := range real {
		if !slices.Equal(documented[p], ms) {
			t.Errorf("route %s: server %v, document %v", p, ms, documented[p])
		}
	}
	for p, ms := range documented {
		if _, ok := real[p]; !ok {
			t.Errorf("documented route %s %v does not exist", p, ms)
		}
	}
	a := do(t, base, "GET", "/dev/v1/openapi.json", "", nil)
	if a.status != 200 || !bytes.Equal(a.body, devapi.OpenAPI) {
		t.Fatalf("served document: %d", a.status)
	}
}

// TestServer_RequestLog: every answered request logs one line naming the
// route template, method, status and error code, at debug, or at warn for
// a 5xx; never the path's ids, the query, the token or a foreign method.
func TestServer_RequestLog(t *testing.T) {
	const job = "eval-0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		level slog.Level
		want  []string // each line's status and code, in order
	}{
		{slog.LevelDebug, []string{"403 forbidden", "503 developer_evaluation_unavailable", "405 method_not_allowed", "200 "}},
		{slog.LevelWarn, []string{"503 developer_evaluation_unavailable"}},
	} {
		var logs testutil.Buffer
		_, base := newServer(t, devapi.Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: tc.level}))})
		do(t, base, "GET", "/dev/v1/evaluation/jobs/"+job+"?scope=team-b", tokAlice, nil)
		do(t, base, "GET", "/dev/v1/evaluation/jobs", tokAlice, nil)
		do(t, base, "BREW", "/dev/v1/evaluation/jobs", tokAlice, nil)
		do(t, base, "GET", "/healthz", "", nil)
		var lines []string
		deadline := time.Now().Add(10 * time.Second)
		for {
			lines = strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) >= len(tc.want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if len(lines) != len(tc.want) {
			t.Fatalf("level %v: %d lines, want %d:\n%s", tc.level, len(lines), len(tc.want), logs.String())
		}
		for i, line := range lines {
			var l struct {
				Level, Msg, Route, Method, Code string
				Status                          int
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			if got := fmt.Sprintf("%d %s", l.Status, l.Code); got != tc.want[i] || l.Msg != "devapi request" || l.Route == "" {
				t.Errorf("level %v line %d: %s, want %q", tc.level, i, line, tc.want[i])
			}
			wantLevel := "DEBUG"
			if l.Status >= 500 {
				wantLevel = "WARN"
			}
			if l.Level != wantLevel {
				t.Errorf("line %s: level %s, want %s", line, l.Level, wantLevel)
			}
		}
		for _, secret := range []string{job, "team-b", tokAlice, "BREW"} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("the log repeats %q:\n%s", secret, logs.String())
			}
		}
		if tc.level == slog.LevelDebug && !strings.Contains(lines[0], `"route":"/dev/v1/evaluation/jobs/{job_id}"`) {
			t.Errorf("the route template is missing: %s", lines[0])
		}
	}
}

// TestOpenAPI_ReportBodiesMatchTheirTypes: the documented render, compare
// and stats bodies name exactly the fields the server decodes (its Go
// types, which refuse unknown fields), options included.
func TestOpenAPI_ReportBodiesMatchTheirTypes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(devapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		schema     string
		body, opts any
	}{
		{"RenderBody", devapi.RenderBody{}, devapi.RenderOptions{}},
		{"CompareBody", devapi.CompareBody{}, devapi.CompareOpts{}},
		{"StatsBody", devapi.StatsBody{}, devapi.StatsParams{}},
	} {
		s, ok := doc.Components.Schemas[c.schema]
		if !ok {
			t.Errorf("schema %s is not documented", c.schema)
			continue
		}
		var props, opts []string
		for k := range s.Properties {
			props = append(props, k)
		}
		for k := range s.Properties["options"].Properties {
			opts = append(opts, k)
		}
		sort.Strings(props)
		sort.Strings(opts)
		if want := jsonFieldNames(c.body); !slices.Equal(props, want) {
			t.Errorf("%s documents %v, the server decodes %v", c.schema, props, want)
		}
		if want := jsonFieldNames(c.opts); !slices.Equal(opts, want) {
			t.Errorf("%s.options documents %v, the server decodes %v", c.schema, opts, want)
		}
	}
}

// TestOpenAPI_JobReportFormats: the job report route documents every
// format the server renders (evalengine.Formats) and the content type
// each is sent with (ContentType), jsonl's JSON Lines stream included.
func TestOpenAPI_JobReportFormats(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	var get struct {
		Parameters []struct {
			Name   string `json:"name"`
			Schema struct {
				Enum []string `json:"enum"`
			} `json:"schema"`
		} `json:"parameters"`
		Responses map[string]struct {
			Content map[string]json.RawMessage `json:"content"`
		} `json:"responses"`
	}
	if err := json.Unmarshal(devapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(doc.Paths[devapi.PathJobReport]["get"], &get); err != nil {
		t.Fatal(err)
	}
	var enum []string
	for _, p := range get.Parameters {
		if p.Name == "format" {
			enum = p.Schema.Enum
		}
	}
	if !slices.Equal(enum, evalengine.Formats()) {
		t.Errorf("format enum %v, the server renders %v", enum, evalengine.Formats())
	}
	for _, f := range evalengine.Formats() {
		ct, _, _ := strings.Cut(devapi.ContentType(f), ";")
		if _, ok := get.Responses["200"].Content[ct]; !ok {
			t.Errorf("format %s: content type %s is not documented", f, ct)
		}
	}
}

// TestOpenAPI_CasesPageMatchesItsType: the cases route's answer as
// documented has the fields of devapi.CasesPage, and its rows those of
// devapi.CaseRow.
func TestOpenAPI_CasesPageMatchesItsType(t *testing.T) {
	type schema struct {
		Properties map[string]struct {
			Items struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"items"`
		} `json:"properties"`
	}
	var doc struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(devapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	page := doc.Components.Schemas["CasesPage"]
	props := slices.Sorted(maps.Keys(page.Properties))
	rows := slices.Sorted(maps.Keys(page.Properties["cases"].Items.Properties))
	if want := jsonFieldNames(devapi.CasesPage{}); !slices.Equal(props, want) {
		t.Errorf("CasesPage documents %v, the type has %v", props, want)
	}
	if want := jsonFieldNames(devapi.CaseRow{}); !slices.Equal(rows, want) {
		t.Errorf("a case row documents %v, the type has %v", rows, want)
	}
}

// TestOpenAPI_CasePageMatchesItsType: the case route's answer as
// documented has the fields of devapi.CasePage, and the route documents
// its path parameters and the query parameters it takes.
func TestOpenAPI_CasePageMatchesItsType(t *testing.T) {
	var doc struct {
		Paths map[string]struct {
			Parameters []struct {
				Name string `json:"name"`
			} `json:"parameters"`
			Get struct {
				Parameters []struct {
					Name string `json:"name"`
				} `json:"parameters"`
			} `json:"get"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(devapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	props := slices.Sorted(maps.Keys(doc.Components.Schemas["CasePage"].Properties))
	if want := jsonFieldNames(devapi.CasePage{}); !slices.Equal(props, want) {
		t.Errorf("CasePage documents %v, the type has %v", props, want)
	}
	path := doc.Paths[devapi.PathJobCase]
	var names []string
	for _, p := range path.Parameters {
		names = append(names, p.Name)
	}
	for _, p := range path.Get.Parameters {
		names = append(names, p.Name)
	}
	if want := []string{"job_id", "case_index", "scope", "offset", "limit"}; !slices.Equal(names, want) {
		t.Errorf("%s documents parameters %v, want %v", devapi.PathJobCase, names, want)
	}
}

// jsonFieldNames lists a struct value's JSON member names, sorted: what
// an openapi schema's properties must list for that type.
func jsonFieldNames(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
