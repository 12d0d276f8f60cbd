package evalrecord

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestJob_JSONNamesTheAgentOnly: the public job carries the agent's name
// (the UI's jobs list shows it) and nothing else of the spec, and reads
// back to the same record.
func TestJob_JSONNamesTheAgentOnly(t *testing.T) {
	j := Job{JobID: "eval-1", Scope: "team", EvalSetID: "travel", Phase: PhaseRunning,
		Spec:     JobSpec{Agent: "travel", Owner: "secret-owner", Options: []byte(`{"x":1}`), Criteria: []byte(`[]`)},
		Progress: Progress{Total: 2, Done: 1}}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`"agent_name":"travel"`, `"job_id":"eval-1"`, `"tasks_total":2`} {
		if !strings.Contains(s, want) {
			t.Errorf("job JSON %s lacks %s", s, want)
		}
	}
	for _, bad := range []string{"secret-owner", "criteria", "options", "spec"} {
		if strings.Contains(s, bad) {
			t.Errorf("job JSON %s exposes %s", s, bad)
		}
	}
	var back Job
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Agent != "travel" || back.JobID != "eval-1" || back.Progress.Done != 1 {
		t.Fatalf("read back %+v", back)
	}
	page, _ := json.Marshal(Page[Job]{Scope: "team", Items: []Job{j}})
	if !strings.Contains(string(page), `"agent_name":"travel"`) {
		t.Fatalf("a page of jobs lacks the agent: %s", page)
	}
}
