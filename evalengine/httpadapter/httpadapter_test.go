package httpadapter_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/evalengine/httpadapter"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

const set = `{"id":"http","version":"1","cases":[{"id":"pune",
  "expected_trajectory":[{"tool":"get_weather","args":{"city":"Pune"}}],
  "turns":[{"input":"weather in Pune","expected_response":"Sunny"},{"input":"thanks","expected_response":"Bye"}]}]}`

// agentServer answers the two turns of set and records the requests.
type agentServer struct {
	mu       sync.Mutex
	requests []map[string]any
	respond  func(w http.ResponseWriter, r *http.Request, req map[string]any)
}

func (s *agentServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	s.respond(w, r, req)
}

func scripted(w http.ResponseWriter, _ *http.Request, req map[string]any) {
	switch req["input"] {
	case "weather in Pune":
		_, _ = io.WriteString(w, `{"output":"Sunny","events":[
			{"author":"agent","content":{"type":"tool_calls","calls":[{"name":"get_weather","args":{"city":"Pune"},"call_id":"c1"}]}},
			{"author":"tool","content":{"type":"tool_response","name":"get_weather","result":{"sky":"sun"},"call_id":"c1"}}],
			"metadata":{"usage":{"input_tokens":12},"api_key":"sk-secret"}}`)
	default:
		_, _ = io.WriteString(w, `{"output":"Bye"}`)
	}
}

func run(t *testing.T, respond func(http.ResponseWriter, *http.Request, map[string]any), cfg func(*httpadapter.Config)) (*evalengine.Result, *agentServer) {
	t.Helper()
	srv := &agentServer{respond: respond}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	c := httpadapter.Config{URL: ts.URL, Client: client}
	if cfg != nil {
		cfg(&c)
	}
	a, err := httpadapter.New(c)
	if err != nil {
		t.Fatal(err)
	}
	s, err := evalengine.ParseSet([]byte(set))
	if err != nil {
		t.Fatal(err)
	}
	traj, _ := evalengine.NewCriterion("trajectory", evalengine.CriterionToolTrajectory, 1, nil)
	o := evalengine.DefaultOptions()
	o.CaseTimeoutMS = 5000
	r, err := evalengine.Run(context.Background(), s, evalengine.RunConfig{
		Adapter: a, Metrics: append(evalengine.DefaultCriteria(), traj), Options: o,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, srv
}

func TestHTTPAdapter_Protocol(t *testing.T) {
	r, srv := run(t, scripted, nil)
	if !r.Passed {
		t.Fatalf("result failed: %+v", r.Cases[0].Samples[0])
	}
	if len(srv.requests) != 2 {
		t.Fatalf("requests: %d", len(srv.requests))
	}
	req := srv.requests[1]
	sid := evalengine.SampleID("http", "1", "pune", 0)
	if req["case_id"] != "pune" || req["sample_id"] != sid || req["session_id"] != sid || req["turn_id"] != "turn-2" || req["turn_index"] != 1.0 || req["input"] != "thanks" {
		t.Fatalf("request: %v", req)
	}
	s0 := r.Cases[0].Samples[0]
	if len(s0.Trajectory) != 2 || s0.Trajectory[0].Tool != "get_weather" {
		t.Fatalf("trajectory: %+v", s0.Trajectory)
	}
	md := s0.Turns[0].AdapterMetadata
	if md["api_key"] != nil || md["usage"] == nil {
		t.Fatalf("metadata: %v", md)
	}
}

func TestHTTPAdapter_TypedErrors(t *testing.T) {
	cases := []struct {
		name    string
		respond func(http.ResponseWriter, *http.Request, map[string]any)
		cfg     func(*httpadapter.Config)
		tag     string
	}{
		{"status", func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
			http.Error(w, "database password leaked", 500)
		}, nil, httpadapter.TagStatus},
		{"not json", func(w http.ResponseWriter, _ *http.Request, _ map[string]any) { _, _ = io.WriteString(w, "hello") }, nil, evalengine.TagInvalidAdapterResult},
		{"missing output", func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
			_, _ = io.WriteString(w, `{"events":[]}`)
		}, nil, evalengine.TagInvalidAdapterResult},
		{"unknown key", func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
			_, _ = io.WriteString(w, `{"output":"x","extra":1}`)
		}, nil, evalengine.TagInvalidAdapterResult},
		{"bad events", func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
			_, _ = io.WriteString(w, `{"output":"x","events":[{"content":{"type":"tool_calls","calls":[{"args":{}}]}}]}`)
		}, nil, evalengine.TagInvalidAdapterEvents},
		{"too large", func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
			_, _ = io.WriteString(w, `{"output":"`+strings.Repeat("x", 200)+`"}`)
		}, func(c *httpadapter.Config) { c.MaxResponseBytes = 100 }, httpadapter.TagResponseTooLarge},
		{"timeout", func(_ http.ResponseWriter, r *http.Request, _ map[string]any) {
			<-r.Context().Done() // never answers; the request deadline ends it
		}, func(c *httpadapter.Config) { c.Timeout = 50 * time.Millisecond }, evalengine.TagTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := run(t, tc.respond, tc.cfg)
			s := r.Cases[0].Samples[0]
			if s.Status != "error" || s.Error != tc.tag {
				t.Fatalf("sample: status %s error %q, want %q", s.Status, s.Error, tc.tag)
			}
			out, _ := json.Marshal(r)
			if strings.Contains(string(out), "password") {
				t.Fatal("server text leaked into the result")
			}
		})
	}
}

func TestNew_InvalidConfig(t *testing.T) {
	for _, c := range []httpadapter.Config{{URL: "ftp://x"}, {URL: "http://"}, {URL: "http://x", MaxResponseBytes: 17 << 20}, {URL: "http://x", Timeout: -1}} {
		if _, err := httpadapter.New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
