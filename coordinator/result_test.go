package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/hashicorp/raft"
	"github.com/vmihailenco/msgpack/v5"
)

// storedResult returns job eval-a's phase, digest and stored document.
func storedResult(t *testing.T, s *evalstore.Store) (evalrecord.Phase, string, []byte) {
	t.Helper()
	var (
		j   *evalrecord.Job
		doc []byte
	)
	if err := s.View(func(tx *evalstore.Tx) (err error) {
		if j, err = tx.JobByID("eval-a"); err != nil {
			return err
		}
		if doc, err = tx.Result("eval-a"); errors.Is(err, evalrecord.ErrNotFound) {
			err = nil
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return j.Phase, j.ResultDigest, doc
}

// leaderBuild is what a leader proposes for eval-a: the transition (digest
// and size only) and the document it built.
func leaderBuild(t *testing.T) *transitionCmd {
	t.Helper()
	f, s := newFSM(t)
	j := cacheJob(t, f, 13, 11, nil)
	tc, err := (&Node{store: s, fsm: f, cfg: Config{ResultDocuments: true}}).completeJob(j, time.UnixMilli(5000))
	if err != nil || tc.To != evalrecord.PhaseCompleted {
		t.Fatalf("%+v %v", tc, err)
	}
	tc.Scope, tc.JobID, tc.Expected, tc.Now = "app", "eval-a", []evalrecord.Phase{evalrecord.PhaseRunning}, 5000
	return tc
}

// TestFSM_CompletionBuildsTheResult checks that a completion carrying only
// the digest makes every FSM store the leader's bytes under the leader's
// digest, whatever its cache held (a follower that saw the whole job, one
// restored or restarted mid-job, one without a cache), and that the entry
// is small.
func TestFSM_CompletionBuildsTheResult(t *testing.T) {
	want := leaderBuild(t)
	e := entry(t, 1000, cmdTransition, want)
	if len(e.Data) > 1024 {
		t.Fatalf("the completing entry is %d bytes", len(e.Data))
	}
	for name, setup := range map[string]func(f *FSM) func(){
		"cached all along": func(f *FSM) func() { return nil },
		"restored mid-job": func(f *FSM) func() { return f.samples.reset },
		"no cache":         func(f *FSM) func() { f.samples.disable(); return nil },
	} {
		t.Run(name, func(t *testing.T) {
			f, s := newFSM(t)
			cacheJob(t, f, 13, 11, setup(f))
			if r := f.ApplyBatch([]*raft.Log{e})[0].(*applyResult); r.Err != nil {
				t.Fatal(r.Err)
			}
			phase, digest, doc := storedResult(t, s)
			if phase != evalrecord.PhaseCompleted || digest != want.Patch.ResultDigest || !bytes.Equal(doc, want.doc) {
				t.Fatalf("%s, digest %s, %d bytes; want completed, %s, %d bytes", phase, digest, len(doc), want.Patch.ResultDigest, len(want.doc))
			}
		})
	}
	t.Run("the leader's own build", func(t *testing.T) {
		// The offered bytes differ from what this FSM would build: stored
		// as offered, they prove the offer was used (a build would not
		// match the entry's digest).
		own := append(append([]byte(nil), want.doc...), ' ')
		tc := *want
		tc.Patch.ResultDigest, tc.Patch.ResultSize = canonjson.DigestBytes(own), int64(len(own))
		f, s := newFSM(t)
		cacheJob(t, f, 13, 11, nil)
		f.offerResult("eval-a", tc.Patch.ResultDigest, own)
		if r := f.Apply(entry(t, 1000, cmdTransition, &tc)).(*applyResult); r.Err != nil {
			t.Fatal(r.Err)
		}
		if _, digest, doc := storedResult(t, s); !bytes.Equal(doc, own) || digest != tc.Patch.ResultDigest {
			t.Fatalf("stored %d bytes", len(doc))
		}
		if len(f.prebuilt) != 0 {
			t.Fatal("the offer outlived its entry")
		}
	})
}

// oldPatch and oldTransitionCmd are the shapes coordinators wrote before
// results left the log: the whole document in the entry.
type oldPatch struct {
	StartedAt  int64
	FinishedAt int64
	Reason     string
	Result     []byte
}

type oldTransitionCmd struct {
	Scope    string              `msgpack:"scope"`
	JobID    string              `msgpack:"job"`
	Expected []evalrecord.Phase  `msgpack:"expected,omitempty"`
	To       evalrecord.Phase    `msgpack:"to"`
	Patch    oldPatch            `msgpack:"patch"`
	Adm      evalstore.Admission `msgpack:"adm"`
	Now      int64               `msgpack:"now"`
}

// TestFSM_OldCompletionEntryStillApplies checks that a log written by the
// previous build (the result inside the completing entry, S2-compressed)
// applies: the document is stored as the entry has it, digest computed.
func TestFSM_OldCompletionEntryStillApplies(t *testing.T) {
	lead := leaderBuild(t)
	old := &oldTransitionCmd{Scope: "app", JobID: "eval-a", Expected: lead.Expected, To: evalrecord.PhaseCompleted,
		Patch: oldPatch{FinishedAt: lead.Patch.FinishedAt, Result: lead.doc}, Now: lead.Now}
	e := entry(t, 1000, cmdTransition, old)
	if e.Data[0] != byte(cmdTransition)|cmdCompressed {
		t.Fatalf("type byte %#x", e.Data[0])
	}
	// The new Patch encodes a completion without digest exactly as the old.
	b1, _ := msgpack.Marshal(&old.Patch)
	b2, _ := msgpack.Marshal(&evalstore.Patch{FinishedAt: old.Patch.FinishedAt, Result: lead.doc})
	if !bytes.Equal(b1, b2) {
		t.Fatal("the Patch encoding changed for old-form completions")
	}
	f, s := newFSM(t)
	cacheJob(t, f, 13, 11, nil)
	if r := f.Apply(e).(*applyResult); r.Err != nil {
		t.Fatal(r.Err)
	}
	phase, digest, doc := storedResult(t, s)
	if phase != evalrecord.PhaseCompleted || digest != canonjson.DigestBytes(lead.doc) || !bytes.Equal(doc, lead.doc) {
		t.Fatalf("%s, digest %s, %d bytes", phase, digest, len(doc))
	}
}

// TestFSM_ResultMismatchStopsTheNode checks that a node whose build does
// not match the log's digest stores nothing, leaves the entry unapplied
// (a restart replays it) and stops with eval_result_digest_mismatch.
func TestFSM_ResultMismatchStopsTheNode(t *testing.T) {
	want := leaderBuild(t)
	bad := *want
	bad.Patch.ResultDigest = canonjson.DigestBytes([]byte("another build"))
	f, s := newFSM(t)
	var stopped error
	f.onFail = func(err error) { stopped = err }
	cacheJob(t, f, 13, 11, nil)
	before := s.AppliedIndex()
	r := f.ApplyBatch([]*raft.Log{entry(t, 1000, cmdTransition, &bad)})[0].(*applyResult)
	if r.Err == nil || r.Err.Code != api.CodeResultDigestMismatch || api.AsError(stopped).Code != api.CodeResultDigestMismatch {
		t.Fatalf("answer %v, stopped with %v", r.Err, stopped)
	}
	if s.AppliedIndex() != before {
		t.Fatalf("applied index %d, was %d", s.AppliedIndex(), before)
	}
	if phase, _, doc := storedResult(t, s); phase != evalrecord.PhaseRunning || doc != nil {
		t.Fatalf("%s with %d result bytes", phase, len(doc))
	}
}

// TestFSM_RecordsCompletion checks the third form: a completion carrying
// the records' running hash and count completes the job on an FSM whose
// records match, stores no document, costs no build (the entry is a few
// hundred bytes and the cache is not consulted), and stops a node whose
// records differ, with nothing applied.
func TestFSM_RecordsCompletion(t *testing.T) {
	f0, s0 := newFSM(t)
	j := cacheJob(t, f0, 13, 11, nil)
	tc, err := (&Node{store: s0, fsm: f0}).completeJob(j, time.UnixMilli(5000))
	if err != nil || tc.To != evalrecord.PhaseCompleted || tc.doc != nil || tc.Patch.ResultRecords != 143 || tc.Patch.Result != nil {
		t.Fatalf("%+v %v", tc, err)
	}
	tc.Scope, tc.JobID, tc.Expected, tc.Now = "app", "eval-a", []evalrecord.Phase{evalrecord.PhaseRunning}, 5000
	e := entry(t, 1000, cmdTransition, tc)
	if len(e.Data) > 512 {
		t.Fatalf("the completing entry is %d bytes", len(e.Data))
	}
	t.Run("matching records", func(t *testing.T) {
		f, s := newFSM(t)
		cacheJob(t, f, 13, 11, func() { f.samples.disable() })
		if r := f.ApplyBatch([]*raft.Log{e})[0].(*applyResult); r.Err != nil {
			t.Fatal(r.Err)
		}
		phase, digest, doc := storedResult(t, s)
		if phase != evalrecord.PhaseCompleted || digest != tc.Patch.ResultDigest || doc != nil {
			t.Fatalf("%s, digest %s, %d bytes", phase, digest, len(doc))
		}
	})
	t.Run("records that differ", func(t *testing.T) {
		bad := *tc
		bad.Patch.ResultRecords = 142
		f, s := newFSM(t)
		var stopped error
		f.onFail = func(err error) { stopped = err }
		cacheJob(t, f, 13, 11, nil)
		before := s.AppliedIndex()
		r := f.ApplyBatch([]*raft.Log{entry(t, 1000, cmdTransition, &bad)})[0].(*applyResult)
		if r.Err == nil || r.Err.Code != api.CodeResultDigestMismatch || api.AsError(stopped).Code != api.CodeResultDigestMismatch {
			t.Fatalf("answer %v, stopped with %v", r.Err, stopped)
		}
		if s.AppliedIndex() != before {
			t.Fatalf("applied index %d, was %d", s.AppliedIndex(), before)
		}
		if phase, _, _ := storedResult(t, s); phase != evalrecord.PhaseRunning {
			t.Fatalf("%s", phase)
		}
	})
}

// TestRecordLines_AggregatesOncePerJob reads a records job's stream in
// pages of a few lines: the pages join into the stream one big page
// gives, that stream decodes to a consistent result, and the case lines
// and summary were aggregated once for all the pages (a 100,000-case
// result used to be aggregated again for every page of its case lines).
func TestRecordLines_AggregatesOncePerJob(t *testing.T) {
	f, s := newFSM(t)
	j := cacheJob(t, f, 13, 11, nil)
	completeRecordsJob(t, f, s, j)
	svc := &service{n: &Node{store: s, fsm: f}, digests: map[string]string{}, tails: newTailCache(TailsAtCompletion)}
	read := func(limit int, maxLines int64) (out []byte, pages int) {
		t.Helper()
		if err := s.View(func(tx *evalstore.Tx) error {
			j, err := tx.JobByID("eval-a")
			if err != nil {
				return err
			}
			rj, err := svc.records.get(tx, j)
			if err != nil {
				return err
			}
			lines := 1 + j.Records + int64(len(rj.p.Set.Cases)) + 1
			for next := int64(0); next < lines; pages++ {
				page, n, err := svc.recordLines(tx, j, nil, func() (*recordJob, error) { return rj, nil }, next, limit, maxLines)
				if err != nil {
					return err
				}
				if n <= next || maxLines > 0 && n-next > maxLines {
					return fmt.Errorf("page at line %d ends at %d (at most %d lines)", next, n, maxLines)
				}
				out, next = append(out, page...), n
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out, pages
	}
	// A read of some sample lines, counted, renders no case line: the
	// aggregate is not built for it.
	if err := s.View(func(tx *evalstore.Tx) error {
		j, err := tx.JobByID("eval-a")
		if err != nil {
			return err
		}
		rj, err := svc.records.get(tx, j)
		if err != nil {
			return err
		}
		for _, from := range []int64{0, 1, 50, 139} { // the sample lines are 1..143
			page, n, err := svc.recordLines(tx, j, nil, func() (*recordJob, error) { return rj, nil }, from, 64<<20, 5)
			if err != nil {
				return err
			}
			if lines := bytes.Count(page, []byte{'\n'}); n != from+5 || lines != 5 {
				return fmt.Errorf("5 lines from %d: %d lines, next %d", from, lines, n)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := svc.records.aggs.Load(); n != 0 {
		t.Fatalf("reading sample lines built the aggregate %d times", n)
	}
	small, pages := read(256, 0)
	if pages < 13+2 {
		t.Fatalf("%d pages: the test wants a page per case line or so", pages)
	}
	if n := svc.records.aggs.Load(); n != 1 {
		t.Fatalf("the aggregate was built %d times for %d pages", n, pages)
	}
	big, _ := read(64<<20, 0)
	if !bytes.Equal(small, big) {
		t.Fatalf("pages of 256 bytes give %d bytes, one page %d", len(small), len(big))
	}
	if counted, _ := read(64<<20, 3); !bytes.Equal(counted, big) {
		t.Fatalf("pages of 3 lines give %d bytes, one page %d", len(counted), len(big))
	}
	st, err := evalengine.ReadStream(bytes.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evalengine.StreamToResult(st); err != nil {
		t.Fatalf("the paged stream does not decode to its summary: %v", err)
	}
}

// completeRecordsJob completes cacheJob's job j (scope "app", id
// "eval-a") as records, as the leader's completion and its apply at
// index 1000 do.
func completeRecordsJob(t testing.TB, f *FSM, s *evalstore.Store, j *evalrecord.Job) {
	t.Helper()
	tc, err := (&Node{store: s, fsm: f}).completeJob(j, time.UnixMilli(5000))
	if err != nil {
		t.Fatal(err)
	}
	tc.Scope, tc.JobID, tc.Expected, tc.Now = "app", "eval-a", []evalrecord.Phase{evalrecord.PhaseRunning}, 5000
	if r := f.ApplyBatch([]*raft.Log{entry(t, max(1000, s.AppliedIndex()+1), cmdTransition, tc)})[0].(*applyResult); r.Err != nil {
		t.Fatal(r.Err)
	}
}
