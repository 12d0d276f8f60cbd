package evalcore

import (
	"strconv"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// Human review error codes (CONTRACTS §5.13).
const (
	CodeInvalidReview       = "invalid_eval_review"
	CodeStaleReviewRevision = "stale_eval_review_revision"
	CodeDuplicateReviewer   = "duplicate_eval_reviewer"
	CodeReviewTerminal      = "eval_review_terminal"
	CodeReviewNotExpired    = "eval_review_not_expired"
)

// Review phases and decisions.
const (
	ReviewSchemaVersion = 1

	ReviewPending  = "pending"
	ReviewApproved = "approved"
	ReviewRejected = "rejected"
	ReviewExpired  = "expired"

	DecisionApprove = "approve"
	DecisionReject  = "reject"

	MaxRequiredReviewers = 16
	maxReviewIDBytes     = 256
	maxReviewValueBytes  = 64 << 10
)

// Review is a human-review record. It is a value: every transition returns
// a new Review with Revision+1 and leaves its input unchanged, so a stored
// record is replaced by compare-and-set on Revision. Time is passed in
// (epoch milliseconds), never read from the clock, so a replicated store
// applies the same transition everywhere. Persistence and reviewer
// identity are the application's.
type Review struct {
	ReviewSchemaVersion int              `json:"review_schema_version"`
	ReviewID            string           `json:"review_id"`
	Revision            int64            `json:"revision"`
	Phase               string           `json:"phase"`
	Subject             any              `json:"subject"`
	RequiredReviewers   int              `json:"required_reviewers"`
	ExpiresAt           *int64           `json:"expires_at"`
	Decisions           []ReviewDecision `json:"decisions"`
}

// ReviewDecision is one reviewer's decision.
type ReviewDecision struct {
	Reviewer string         `json:"reviewer"`
	Decision string         `json:"decision"` // approve | reject
	Metadata map[string]any `json:"metadata"`
}

// NewReview opens a pending review at revision 1. subject is plain JSON
// (what is being reviewed: a case id, an ensemble document); required is
// the approval quorum, 1..16 (0 means 1); expiresAt, when not nil, is the
// epoch millisecond from which Expire may close it.
func NewReview(id string, subject any, required int, expiresAt *int64) (*Review, error) {
	if required == 0 {
		required = 1
	}
	r := &Review{
		ReviewSchemaVersion: ReviewSchemaVersion,
		ReviewID:            id,
		Revision:            1,
		Phase:               ReviewPending,
		Subject:             subject,
		RequiredReviewers:   required,
		ExpiresAt:           expiresAt,
		Decisions:           []ReviewDecision{},
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return r, nil
}

// check validates a review's shape and that its phase follows from its
// decisions, so a forged record is refused (invalid_eval_review).
func (r *Review) check() error {
	bad := func(reason string) error { return ReasonErr(CodeInvalidReview, reason, "") }
	if r == nil {
		return bad("nil")
	}
	if r.ReviewSchemaVersion != ReviewSchemaVersion {
		return bad("review_schema_version")
	}
	if !validReviewID(r.ReviewID) {
		return bad("review_id")
	}
	if r.Revision < 1 {
		return bad("revision")
	}
	if r.RequiredReviewers < 1 || r.RequiredReviewers > MaxRequiredReviewers {
		return bad("required_reviewers")
	}
	if r.ExpiresAt != nil && *r.ExpiresAt < 0 {
		return bad("expires_at")
	}
	if n, ok := PlainSize(r.Subject); !ok || n > maxReviewValueBytes {
		return bad("subject")
	}
	approvals, rejects := 0, 0
	seen := map[string]bool{}
	for i, d := range r.Decisions {
		if !validReviewID(d.Reviewer) || seen[d.Reviewer] {
			return bad("reviewer")
		}
		seen[d.Reviewer] = true
		if n, ok := PlainSize(d.Metadata); !ok || n > maxReviewValueBytes {
			return bad("decision_metadata")
		}
		switch d.Decision {
		case DecisionApprove:
			approvals++
		case DecisionReject:
			rejects++
		default:
			return bad("decision")
		}
		// No decision may follow the one that closed the review.
		if (rejects > 0 || approvals >= r.RequiredReviewers) && i != len(r.Decisions)-1 {
			return bad("decision_after_terminal")
		}
	}
	want := ReviewPending
	switch {
	case rejects > 0:
		want = ReviewRejected
	case approvals >= r.RequiredReviewers:
		want = ReviewApproved
	case r.Phase == ReviewExpired && r.ExpiresAt != nil:
		want = ReviewExpired
	}
	if r.Phase != want {
		return bad("phase")
	}
	return nil
}

func validReviewID(s string) bool {
	return s != "" && len(s) <= maxReviewIDBytes && utf8.ValidString(s)
}

// Terminal reports whether no transition can change the review.
func (r *Review) Terminal() bool { return r.Phase != ReviewPending }

// clone copies r deeply enough that the new revision shares nothing
// mutable with the old.
func (r *Review) clone() *Review {
	c := *r
	c.Decisions = append([]ReviewDecision{}, r.Decisions...)
	if r.ExpiresAt != nil {
		e := *r.ExpiresAt
		c.ExpiresAt = &e
	}
	return &c
}

// guard applies the checks every transition shares, in order: a valid
// record, the expected revision (stale_eval_review_revision), a pending
// phase (eval_review_terminal).
func (r *Review) guard(expectedRevision int64) error {
	if err := r.check(); err != nil {
		return err
	}
	if r.Revision != expectedRevision {
		return NewErr(CodeStaleReviewRevision, strconv.FormatInt(r.Revision, 10))
	}
	if r.Terminal() {
		return NewErr(CodeReviewTerminal, r.Phase)
	}
	return nil
}

// RecordDecision returns the review with reviewer's decision added. Any
// reject makes it rejected; approvals reaching the quorum make it
// approved. It fails on a stale revision, a terminal review or a reviewer
// who already decided.
func (r *Review) RecordDecision(expectedRevision int64, reviewer, decision string, metadata map[string]any) (*Review, error) {
	if err := r.guard(expectedRevision); err != nil {
		return nil, err
	}
	if !validReviewID(reviewer) || (decision != DecisionApprove && decision != DecisionReject) {
		return nil, ReasonErr(CodeInvalidReview, "decision", "")
	}
	if metadata == nil {
		metadata = map[string]any{}
	}
	if n, ok := PlainSize(metadata); !ok || n > maxReviewValueBytes {
		return nil, ReasonErr(CodeInvalidReview, "decision_metadata", "")
	}
	approvals := 0
	for _, d := range r.Decisions {
		if d.Reviewer == reviewer {
			return nil, NewErr(CodeDuplicateReviewer, reviewer)
		}
		if d.Decision == DecisionApprove {
			approvals++
		}
	}
	next := r.clone()
	next.Revision++
	next.Decisions = append(next.Decisions, ReviewDecision{Reviewer: reviewer, Decision: decision, Metadata: metadata})
	switch {
	case decision == DecisionReject:
		next.Phase = ReviewRejected
	case approvals+1 >= r.RequiredReviewers:
		next.Phase = ReviewApproved
	}
	return next, nil
}

// Expire closes a pending review whose expiry has come: now (epoch ms,
// from the caller) ≥ ExpiresAt. A review without expiry, or not yet due,
// is eval_review_not_expired.
func (r *Review) Expire(expectedRevision int64, nowMS int64) (*Review, error) {
	if err := r.guard(expectedRevision); err != nil {
		return nil, err
	}
	if r.ExpiresAt == nil || nowMS < *r.ExpiresAt {
		return nil, NewErr(CodeReviewNotExpired, "")
	}
	next := r.clone()
	next.Revision++
	next.Phase = ReviewExpired
	return next, nil
}

// DecodeReview reads a stored review strictly (exact keys, bounded,
// phase consistent with decisions).
func DecodeReview(data []byte) (*Review, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.Limits{MaxBytes: 4 << 20})
	if err != nil {
		return nil, LimitErr(CodeInvalidReview, err)
	}
	m, ok := v.(map[string]any)
	if !ok || len(UnknownKeys(m, KeySet("review_schema_version", "review_id", "revision", "phase", "subject",
		"required_reviewers", "expires_at", "decisions"))) > 0 || len(m) != 8 {
		return nil, ReasonErr(CodeInvalidReview, "keys", "")
	}
	if ds, ok := m["decisions"].([]any); ok {
		for _, d := range ds {
			dm, ok := d.(map[string]any)
			if !ok || len(dm) != 3 || len(UnknownKeys(dm, KeySet("reviewer", "decision", "metadata"))) > 0 {
				return nil, ReasonErr(CodeInvalidReview, "decision_keys", "")
			}
		}
	}
	var r Review
	if err := jsonlimit.Unmarshal(data, jsonlimit.Limits{MaxBytes: 4 << 20}, &r); err != nil {
		return nil, LimitErr(CodeInvalidReview, err)
	}
	r.Subject = m["subject"]
	if r.Decisions == nil {
		return nil, ReasonErr(CodeInvalidReview, "decisions", "")
	}
	for i := range r.Decisions {
		if r.Decisions[i].Metadata == nil {
			return nil, ReasonErr(CodeInvalidReview, "decision_metadata", "")
		}
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return &r, nil
}
