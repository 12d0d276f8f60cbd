package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
)

// connServer is an OpenAI-compatible server on 127.0.0.1 that answers
// after delay and counts the connections it accepted and saw closed, and
// the calls it answered; a judge's prompt gets a score.
type connServer struct {
	*httptest.Server
	opened, closed, calls atomic.Int32
}

func newConnServer(t *testing.T, delay time.Duration) *connServer {
	t.Helper()
	s := &connServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.calls.Add(1)
		time.Sleep(delay) // the calls of a wave overlap
		text := "ok"
		if strings.Contains(string(body), "polite and correct") {
			text = `{\"score\":0.9,\"rationale\":\"fine\"}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"`+text+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
	}))
	testutil.CountConns(s.Server, &s.opened, &s.closed)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestEvalRun_ClosesItsProviderConnections: a local `adk eval run` closes
// every provider connection itself before it writes the report (its
// workers stop and the connections beyond the running ones are closed,
// the last at the run's end), not the process's exit; and closing them
// costs no new connection: its samples, of three turns and an LLM judge
// on the same host, 12 of them at --concurrency 8 (a last wave of 4
// while 4 workers have stopped and their connections were closed), open
// no more connections than its 8 workers hold at once, as before. In
// process (serial): the pool is the process's.
func TestEvalRun_ClosesItsProviderConnections(t *testing.T) {
	const cases, conc = 12, 8
	s := newConnServer(t, 20*time.Millisecond)
	dir := t.TempDir()
	agentFile := writeFile(t, dir, "agent.json", `{"schema_version":1,"name":"a","model":{"provider":"openai","model":"fake","base_url":"`+s.URL+`/v1","max_attempts":1}}`)
	judgeFile := writeFile(t, dir, "judge.json", `{"provider":"openai","model":"fake","base_url":"`+s.URL+`/v1","api_key_env":"ADK_TEST_JUDGE_KEY"}`)
	criteria := writeFile(t, dir, "criteria.json", `[{"id":"r","criterion":"exact_response","threshold":1},
 {"id":"q","criterion":"llm_judge","threshold":0.5,"config":{"rubric":"Is the answer polite and correct?","rubric_id":"polite","rubric_version":"1"}}]`)
	var set strings.Builder
	set.WriteString(`{"schema_version":2,"id":"conns","version":"1","cases":[`)
	for i := range cases {
		if i > 0 {
			set.WriteByte(',')
		}
		fmt.Fprintf(&set, `{"id":"c%d","turns":[{"id":"t1","input":"hi","expected_response":"ok"},{"id":"t2","input":"and?","expected_response":"ok"},{"id":"t3","input":"so?","expected_response":"ok"}]}`, i)
	}
	set.WriteString("]}")
	setFile := writeFile(t, dir, "set.json", set.String())
	t.Setenv("ADK_TEST_JUDGE_KEY", "k-test")

	var out, errb bytes.Buffer
	code := run([]string{"eval", "run", "--config", agentFile, "--eval-set", setFile, "--criteria", criteria,
		"--judge-config", judgeFile, "--concurrency", fmt.Sprint(conc), "--format", "json"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	res, err := evalengine.DecodeResult(out.Bytes())
	if err != nil || !res.Passed {
		t.Fatalf("result passed=%v err=%v stderr %q", res != nil && res.Passed, err, errb.String())
	}
	if n := s.calls.Load(); n != cases*4 {
		t.Fatalf("%d calls, want %d (3 turns and a judge per sample)", n, cases*4)
	}
	if n := s.opened.Load(); n > conc {
		t.Fatalf("%d connections opened for %d workers: closing the idle ones cost new ones", n, conc)
	}
	// The server sees each close shortly after adk made it; a connection
	// left open would stay so for the pool's idle timeout (90 s).
	var once sync.Once
	testutil.WaitFor(t, 10*time.Second, "every provider connection closed by the run", func() bool {
		if s.closed.Load() == s.opened.Load() {
			return true
		}
		once.Do(func() { t.Logf("after the run: %d connections opened, %d closed", s.opened.Load(), s.closed.Load()) })
		return false
	})
}
