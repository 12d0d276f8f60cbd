package coordinator

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// TestValidNotEvaluated: a submit's not_evaluated cases are bounded, each
// a non-empty id not in the set and not listed twice, each reason a
// lower-case token; a bad entry is a typed error naming it.
func TestValidNotEvaluated(t *testing.T) {
	set := &evalengine.Set{Cases: []evalengine.Case{{ID: "a"}, {ID: "b"}}}
	ok := []evalrecord.NotEvaluated{{CaseID: "s1", Reason: evalengine.NotEvaluatedUserSimulator}, {CaseID: "s2", Reason: "x_1"}}
	if err := validNotEvaluated(ok, set); err != nil {
		t.Fatal(err)
	}
	if err := validNotEvaluated(nil, set); err != nil {
		t.Fatal(err)
	}
	big := []evalrecord.NotEvaluated{{CaseID: strings.Repeat("x", api.MaxNotEvaluatedBytes), Reason: "r"}}
	for name, c := range map[string]struct {
		ne         []evalrecord.NotEvaluated
		code, want string
	}{
		"empty id":      {[]evalrecord.NotEvaluated{{Reason: "r"}}, api.CodeInvalidRequest, "not_evaluated[0].case_id: empty"},
		"a set case":    {[]evalrecord.NotEvaluated{{CaseID: "b", Reason: "r"}}, api.CodeInvalidRequest, `not_evaluated[0].case_id: "b"`},
		"listed twice":  {[]evalrecord.NotEvaluated{{CaseID: "s", Reason: "r"}, {CaseID: "s", Reason: "r"}}, api.CodeInvalidRequest, `not_evaluated[1].case_id: "s"`},
		"bad reason":    {[]evalrecord.NotEvaluated{{CaseID: "s", Reason: "Not Configured"}}, api.CodeInvalidRequest, "not_evaluated[0].reason"},
		"empty reason":  {[]evalrecord.NotEvaluated{{CaseID: "s"}}, api.CodeInvalidRequest, "not_evaluated[0].reason"},
		"over the size": {big, api.CodeRequestLimit, "not_evaluated: over"},
	} {
		err := validNotEvaluated(c.ne, set)
		if e := api.AsError(err); err == nil || e.Code != c.code || !strings.Contains(e.Error(), c.want) {
			t.Errorf("%s: %v, want %s naming %q", name, err, c.code, c.want)
		}
	}
}

// TestFSM_SubmitWithARequestIDCreatesOneJob: a submit sent again with its
// request id (its first coordinator died after the apply) answers the job
// the first created, whatever job id the second validating node drew, and
// through a snapshot install and a batch; the same id with other content
// is a typed conflict naming the field; a lookup finds the job, or names
// what is missing; and a submit without an id still creates a job each
// time.
func TestFSM_SubmitWithARequestIDCreatesOneJob(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	keyed := func(idx uint64, jobID, digest string, now int64) *raft.Log {
		l := submitEntry(t, idx, jobID)
		_, body, _ := decodeCmd(l.Data)
		var c submitCmd
		decodeBody(cmdSubmit, body, &c)
		c.RequestID, c.RequestDigest, c.Now = id, digest, now
		return entry(t, idx, cmdSubmit, &c)
	}
	lookup := func(idx uint64, digest, upload string) *raft.Log {
		return entry(t, idx, cmdSubmit, &submitCmd{Set: evalrecord.SetRecord{Scope: "app"}, Job: evalrecord.Job{Scope: "app"},
			RequestID: id, RequestDigest: digest, SetUpload: upload, Lookup: true, Now: 5})
	}
	jobs := func(s *evalstore.Store) int {
		var n int
		_ = s.View(func(tx *evalstore.Tx) error {
			p, err := tx.ListJobs("app", 100, "")
			if err != nil {
				t.Fatal(err)
			}
			n = len(p.Items)
			return nil
		})
		return n
	}
	f, s := newFSM(t)
	if r := f.Apply(keyed(1, "eval-a", "d1", 1)).(*applyResult); r.Err != nil || r.Job.JobID != "eval-a" {
		t.Fatalf("first submit: %+v", r)
	}
	// Sent again through another node: another job id, a later time.
	if r := f.Apply(keyed(2, "eval-b", "d1", 3)).(*applyResult); r.Err != nil || r.Job == nil || r.Job.JobID != "eval-a" {
		t.Fatalf("the same request again: %+v, want job eval-a", r)
	}
	if r := f.Apply(lookup(3, "d1", "")).(*applyResult); r.Err != nil || r.Job == nil || r.Job.JobID != "eval-a" {
		t.Fatalf("lookup: %+v, want job eval-a", r)
	}
	for _, l := range []*raft.Log{keyed(4, "eval-c", "d2", 4), lookup(5, "d2", "")} {
		r := f.Apply(l).(*applyResult)
		if r.Err == nil || r.Err.Code != evalrecord.CodeRequestIDConflict || !strings.Contains(r.Err.Detail, "submit.request_id") {
			t.Fatalf("index %d, other content under the id: %+v, want %s naming submit.request_id", l.Index, r, evalrecord.CodeRequestIDConflict)
		}
	}
	if n := jobs(s); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	// Without an id every submit is a job.
	if r := f.Apply(submitEntry(t, 6, "eval-d")).(*applyResult); r.Err != nil || r.Job.JobID != "eval-d" {
		t.Fatalf("a submit without an id: %+v", r)
	}

	// A new node from a snapshot, then the retry in a batch.
	g, gs := restored(t, f)
	out := g.ApplyBatch([]*raft.Log{keyed(7, "eval-e", "d1", 7), keyed(8, "eval-f", "d1", 8)})
	for i, o := range out {
		if r := o.(*applyResult); r.Err != nil || r.Job == nil || r.Job.JobID != "eval-a" {
			t.Fatalf("batch entry %d after a snapshot install: %+v, want job eval-a", i, r)
		}
	}
	if n := jobs(gs); n != 2 {
		t.Fatalf("%d jobs after the install, want 2", n)
	}

	// A lookup for an id nobody used names what is missing.
	h, _ := newFSM(t)
	if r := h.Apply(lookup(1, "d1", "")).(*applyResult); r.Err == nil || r.Err.Code != evalrecord.CodeNotFound || !strings.Contains(r.Err.Detail, "submit.request_id") {
		t.Fatalf("lookup of an unknown id: %+v", r)
	}
	if r := h.Apply(lookup(2, "d1", "0123456789abcdef0123456789abcdef")).(*applyResult); r.Err == nil || r.Err.Code != evalrecord.CodeInvalidSetUpload {
		t.Fatalf("lookup of an unknown id with an upload: %+v", r)
	}
}

// TestSubmitDigest: every field of a submit's content changes the
// digest; the request id does not.
func TestSubmitDigest(t *testing.T) {
	base := api.SubmitRequest{Set: []byte(`{}`), Agent: "a", Criteria: []byte(`{}`), Options: []byte(`{}`), Metadata: []byte(`{}`),
		Owner: "o", OwnerTTLMS: 5, NotEvaluated: []evalrecord.NotEvaluated{{CaseID: "c", Reason: "r"}}, RequestID: "x"}
	d := submitDigest("app", &base)
	same := base
	same.RequestID = "y"
	if submitDigest("app", &same) != d {
		t.Fatal("the request id changed the digest")
	}
	if submitDigest("other", &base) == d {
		t.Error("the scope did not change the digest")
	}
	for name, mut := range map[string]func(r *api.SubmitRequest){
		"set":           func(r *api.SubmitRequest) { r.Set = []byte(`{ }`) },
		"set_upload":    func(r *api.SubmitRequest) { r.SetUpload = "u" },
		"agent":         func(r *api.SubmitRequest) { r.Agent = "b" },
		"criteria":      func(r *api.SubmitRequest) { r.Criteria = nil },
		"options":       func(r *api.SubmitRequest) { r.Options = []byte(`{"samples":2}`) },
		"metadata":      func(r *api.SubmitRequest) { r.Metadata = nil },
		"owner":         func(r *api.SubmitRequest) { r.Owner = "p" },
		"owner_ttl_ms":  func(r *api.SubmitRequest) { r.OwnerTTLMS = 6 },
		"not_evaluated": func(r *api.SubmitRequest) { r.NotEvaluated = nil },
		"a field moved": func(r *api.SubmitRequest) { r.Agent, r.Owner = "", "ao" },
	} {
		r := base
		mut(&r)
		if submitDigest("app", &r) == d {
			t.Errorf("%s did not change the digest", name)
		}
	}
}
