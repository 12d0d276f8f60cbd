package evalengine_test

import (
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

func mustReview(t *testing.T, required int, expiresAt *int64) *evalengine.Review {
	t.Helper()
	r, err := evalengine.NewReview("rev-1", map[string]any{"case_id": "c1", "score": 0.55}, required, expiresAt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReview_QuorumAndTerminalImmutability(t *testing.T) {
	r := mustReview(t, 2, nil)
	r2, err := r.RecordDecision(1, "alice", evalengine.DecisionApprove, map[string]any{"note": "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Phase != evalengine.ReviewPending || r2.Revision != 2 || r.Revision != 1 || len(r.Decisions) != 0 {
		t.Fatalf("first approval: new %+v old %+v", r2, r)
	}
	_, err = r2.RecordDecision(2, "alice", evalengine.DecisionApprove, nil)
	wantCode(t, err, evalengine.CodeDuplicateReviewer)
	r3, err := r2.RecordDecision(2, "bob", evalengine.DecisionApprove, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Phase != evalengine.ReviewApproved || r3.Revision != 3 || !r3.Terminal() || r2.Phase != evalengine.ReviewPending {
		t.Fatalf("quorum: %+v", r3)
	}
	_, err = r3.RecordDecision(3, "carol", evalengine.DecisionReject, nil)
	wantCode(t, err, evalengine.CodeReviewTerminal)
	_, err = r3.Expire(3, 1<<62)
	wantCode(t, err, evalengine.CodeReviewTerminal)

	data, _ := json.Marshal(r3)
	back, err := evalengine.DecodeReview(data)
	if err != nil || back.Phase != evalengine.ReviewApproved || len(back.Decisions) != 2 {
		t.Fatalf("round trip %+v %v", back, err)
	}
}

func TestReview_RejectAndStaleRevision(t *testing.T) {
	r := mustReview(t, 3, nil)
	_, err := r.RecordDecision(0, "alice", evalengine.DecisionApprove, nil)
	wantCode(t, err, evalengine.CodeStaleReviewRevision)
	r2, _ := r.RecordDecision(1, "alice", evalengine.DecisionApprove, nil)
	_, err = r2.RecordDecision(1, "bob", evalengine.DecisionApprove, nil)
	wantCode(t, err, evalengine.CodeStaleReviewRevision)
	r3, err := r2.RecordDecision(2, "bob", evalengine.DecisionReject, map[string]any{"why": "hallucinated"})
	if err != nil || r3.Phase != evalengine.ReviewRejected {
		t.Fatalf("reject: %+v %v", r3, err)
	}
	_, err = r3.RecordDecision(3, "carol", evalengine.DecisionApprove, nil)
	wantCode(t, err, evalengine.CodeReviewTerminal)
}

func TestReview_ExpiryIsRevisionGuarded(t *testing.T) {
	at := int64(1_000)
	r := mustReview(t, 1, &at)
	_, err := r.Expire(1, 999)
	wantCode(t, err, evalengine.CodeReviewNotExpired)
	_, err = r.Expire(2, 1_000)
	wantCode(t, err, evalengine.CodeStaleReviewRevision)
	e, err := r.Expire(1, 1_000)
	if err != nil || e.Phase != evalengine.ReviewExpired || e.Revision != 2 {
		t.Fatalf("expire: %+v %v", e, err)
	}
	_, err = e.RecordDecision(2, "alice", evalengine.DecisionApprove, nil)
	wantCode(t, err, evalengine.CodeReviewTerminal)
	_, err = mustReview(t, 1, nil).Expire(1, 1<<62)
	wantCode(t, err, evalengine.CodeReviewNotExpired)
}

func TestReview_OpaqueTermsAreRejected(t *testing.T) {
	_, err := evalengine.NewReview("r", map[string]any{"pid": make(chan int)}, 1, nil)
	wantCode(t, err, evalengine.CodeInvalidReview)
	_, err = evalengine.NewReview("r", func() {}, 1, nil)
	wantCode(t, err, evalengine.CodeInvalidReview)
	_, err = evalengine.NewReview("", "x", 1, nil)
	wantCode(t, err, evalengine.CodeInvalidReview)
	_, err = evalengine.NewReview("r", "x", 17, nil)
	wantCode(t, err, evalengine.CodeInvalidReview)
	_, err = mustReview(t, 1, nil).RecordDecision(1, "a", "maybe", nil)
	wantCode(t, err, evalengine.CodeInvalidReview)
	_, err = mustReview(t, 1, nil).RecordDecision(1, "a", evalengine.DecisionApprove, map[string]any{"f": struct{}{}})
	wantCode(t, err, evalengine.CodeInvalidReview)

	// A stored record whose phase does not follow from its decisions, or
	// with extra keys, is refused.
	for _, doc := range []string{
		`{"review_schema_version":1,"review_id":"r","revision":2,"phase":"approved","subject":null,"required_reviewers":2,"expires_at":null,"decisions":[{"reviewer":"a","decision":"approve","metadata":{}}]}`,
		`{"review_schema_version":1,"review_id":"r","revision":1,"phase":"pending","subject":null,"required_reviewers":1,"expires_at":null,"decisions":[],"extra":1}`,
		`{"review_schema_version":1,"review_id":"r","revision":3,"phase":"rejected","subject":null,"required_reviewers":1,"expires_at":null,"decisions":[{"reviewer":"a","decision":"reject","metadata":{}},{"reviewer":"b","decision":"approve","metadata":{}}]}`,
	} {
		_, err := evalengine.DecodeReview([]byte(doc))
		wantCode(t, err, evalengine.CodeInvalidReview)
	}
}
