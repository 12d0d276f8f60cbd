package devapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/testcluster"
)

// TestClusterDevAPI_IdempotencyKey: a submission's Idempotency-Key is
// the coordinator's request id, so the caller's own retries (here also
// through a second, freshly started gateway) answer the job the first
// attempt made and create nothing; the key with another body is a typed
// 422; a bad key is a typed 400 naming the header, never repeating the
// value, and creates nothing. A cancel with a key answers 202 again for
// a job it already cancelled; without one the contract's 409 stays.
func TestClusterDevAPI_IdempotencyKey(t *testing.T) {
	e := startEnv(t, testcluster.EvalOptions{Agent: &testcluster.ScriptedAgent{TurnDelay: 200 * time.Millisecond}, Capacity: 1})
	_, second := newServer(t, devapi.Options{Tokens: e.tokens, Coord: e.cl, NATS: e.nc, Agents: []string{"scripted"}})
	body := submitBody(t, testcluster.EvalSet("idem", 50), `,"metadata":{"try":"1"}`)
	const key = "3f1e0a52-8c4b-4d7e-9a61-0b2c5d8e7f90"
	jobs := func(scope string) int {
		t.Helper()
		a := do(t, e.base, "GET", "/dev/v1/evaluation/jobs?scope="+scope, tokAlice, nil)
		if a.status != 200 {
			t.Fatalf("list: %d %s", a.status, a.body)
		}
		return len(decode[evalrecord.Page[evalrecord.Job]](t, a).Items)
	}

	a := do(t, e.base, "POST", "/dev/v1/evaluation/jobs", tokAlice, body, "idempotency-key", key)
	if a.status != 202 {
		t.Fatalf("submit: %d %s", a.status, a.body)
	}
	job := decode[evalrecord.Job](t, a)
	// Retries: the same gateway, another one, the structured-field form.
	for i, tc := range []struct{ base, key string }{{e.base, key}, {second, key}, {e.base, `"` + key + `"`}} {
		a := do(t, tc.base, "POST", "/dev/v1/evaluation/jobs", tokAlice, body, "Idempotency-Key", tc.key)
		if got := decode[evalrecord.Job](t, a); a.status != 202 || got.JobID != job.JobID ||
			a.header.Get("location") != "/dev/v1/evaluation/jobs/"+job.JobID {
			t.Fatalf("retry %d: %d %s, want job %s", i, a.status, a.body, job.JobID)
		}
	}
	if n := jobs("team-a"); n != 1 {
		t.Fatalf("%d jobs after 4 submissions with one key", n)
	}

	// The key with another body: 422, naming the header, not the key.
	a = do(t, e.base, "POST", "/dev/v1/evaluation/jobs", tokAlice, submitBody(t, testcluster.EvalSet("idem", 50), `,"metadata":{"try":"2"}`),
		"idempotency-key", key)
	if a.status != http.StatusUnprocessableEntity || a.errCode() != devapi.CodeIdempotencyKeyReused || strings.Contains(string(a.body), key) ||
		!strings.Contains(string(a.body), `"header":"Idempotency-Key"`) {
		t.Fatalf("reused key: %d %s", a.status, a.body)
	}

	// Bad keys: typed, the value never echoed, nothing created.
	for name, k := range map[string]string{
		"short":       "secret-short",
		"long":        "secret-" + strings.Repeat("x", 64),
		"space":       "secret value 0123456789",
		"slash":       "secret/value/0123456789",
		"non-ascii":   "secret-välue-0123456789",
		"empty":       "",
		"empty quote": `""`,
		"open quote":  `"secret-0123456789abcdef`,
	} {
		a := do(t, e.base, "POST", "/dev/v1/evaluation/jobs", tokAlice, body, "idempotency-key", k)
		var eb struct {
			Error struct {
				Details map[string]string `json:"details"`
			} `json:"error"`
		}
		_ = json.Unmarshal(a.body, &eb)
		if a.status != 400 || a.errCode() != devapi.CodeInvalidRequest || eb.Error.Details["header"] != devapi.HeaderIdempotencyKey ||
			!strings.Contains(eb.Error.Details["valid"], "16..64 bytes of [A-Za-z0-9_-]") || strings.Contains(string(a.body), "secret") {
			t.Errorf("%s key: %d %s", name, a.status, a.body)
		}
	}
	req, err := http.NewRequest("POST", e.base+"/dev/v1/evaluation/jobs", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("authorization", "Bearer "+tokAlice)
	req.Header.Set("content-type", "application/json")
	req.Header.Add("idempotency-key", key)
	req.Header.Add("idempotency-key", "another-key-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("two keys: %d", resp.StatusCode)
	}
	if n := jobs("team-a"); n != 1 {
		t.Fatalf("%d jobs after refused submissions", n)
	}

	// Keys are per scope: the same key and body in another scope is
	// another submission.
	if a := do(t, e.base, "POST", "/dev/v1/evaluation/jobs?scope=shared", tokAlice, body, "idempotency-key", key); a.status != 202 ||
		decode[evalrecord.Job](t, a).JobID == job.JobID {
		t.Fatalf("other scope: %d %s", a.status, a.body)
	}

	// Cancel: retried with a key, 202 each time; without one, 409.
	jobPath := "/dev/v1/evaluation/jobs/" + job.JobID
	if a := do(t, e.base, "DELETE", jobPath, tokAlice, nil, "idempotency-key", "bad"); a.status != 400 || strings.Contains(string(a.body), `"bad"`) {
		t.Fatalf("cancel with a bad key: %d %s", a.status, a.body)
	}
	for i, base := range []string{e.base, second, e.base} {
		if a := do(t, base, "DELETE", jobPath, tokAlice, nil, "idempotency-key", "cancel-"+key); a.status != 202 {
			t.Fatalf("cancel %d: %d %s", i, a.status, a.body)
		}
	}
	e.c.WaitJob(e.cl, "team-a", job.JobID, 20*time.Second, "cancelled")
	if a := do(t, e.base, "DELETE", jobPath, tokAlice, nil, "idempotency-key", "cancel-"+key); a.status != 202 {
		t.Fatalf("cancel after the job ended: %d %s", a.status, a.body)
	}
	if a := do(t, e.base, "DELETE", jobPath, tokAlice, nil); a.status != 409 || a.errCode() != devapi.CodeStateConflict {
		t.Fatalf("cancel without a key: %d %s", a.status, a.body)
	}
}
