package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// TestResultTail_ServesTheStreamWithoutAggregating completes a records
// job, renders its tail as a node's builder does, and reads the job on a
// node that has nothing in memory (a restart, or a node restored from a
// snapshot that carried the tail): the stream is the same bytes as the
// one aggregated from the records, and the read aggregates nothing.
// result_cases answers the failures-first rows from the tail and from
// the aggregate alike; a tail naming other records is not used.
func TestResultTail_ServesTheStreamWithoutAggregating(t *testing.T) {
	f, s := newFSM(t)
	var queued []string
	f.onRecordsCompleted = func(id string) { queued = append(queued, id) }
	j := cacheJob(t, f, 13, 1, nil) // one sample a case: some cases pass
	completeRecordsJob(t, f, s, j)
	if fmt.Sprint(queued) != "[eval-a]" {
		t.Fatalf("completions told to the tail builder: %v", queued)
	}
	node := func() *service {
		return &service{n: &Node{store: s, fsm: f}, digests: map[string]string{}, tails: newTailCache(TailsAtCompletion)}
	}
	// stream reads job eval-a's whole stream as result pages of 300 bytes.
	stream := func(svc *service) []byte {
		t.Helper()
		var out []byte
		for next := int64(0); ; {
			var rep *api.Reply
			if err := s.View(func(tx *evalstore.Tx) (err error) {
				j, err := tx.JobByID("eval-a")
				if err != nil {
					return err
				}
				rep, err = svc.recordsResult(tx, &api.Request{Scope: "app", JobID: "eval-a", Offset: next, MaxBytes: 300, Format: api.ResultJSONL}, j)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			out, next = append(out, rep.Result...), rep.NextOffset
			if next >= rep.ResultSize {
				return out
			}
		}
	}
	// rows reads every row of the failures-first order, limit rows a request.
	rows := func(svc *service, limit int) []byte {
		t.Helper()
		var out []byte
		for next := int64(0); next < 13; {
			var rep *api.Reply
			if err := s.View(func(tx *evalstore.Tx) (err error) {
				rep, err = svc.casesPage(tx, &api.Request{Scope: "app", JobID: "eval-a", Offset: next, Limit: limit}, 500)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if rep.NextOffset <= next || rep.NextOffset > next+int64(limit) {
				t.Fatalf("rows from %d: next %d", next, rep.NextOffset)
			}
			out, next = append(out, rep.Result...), rep.NextOffset
		}
		return out
	}

	cold := node()
	want := stream(cold)
	if n := cold.records.aggs.Load(); n != 1 {
		t.Fatalf("without a tail the stream was aggregated %d times", n)
	}
	// The rows failures first, from the stream itself.
	sc, err := evalengine.OpenStreamCases(want[:bytes.IndexByte(want, '\n')+1], want[bytes.LastIndexByte(want[:len(want)-1], '\n')+1:])
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(want, []byte{'\n'})
	caseLines := lines[len(lines)-2-13 : len(lines)-2]
	var failedRows, passedRows []byte
	if err := sc.Read(bytes.NewReader(bytes.Join(caseLines, nil)), func(ci int, c *evalengine.CaseResult) error {
		if c.Passed {
			passedRows = append(passedRows, caseLines[ci]...)
		} else {
			failedRows = append(failedRows, caseLines[ci]...)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(failedRows) == 0 || len(passedRows) == 0 {
		t.Fatalf("the job wants failed and passed cases: %d and %d bytes", len(failedRows), len(passedRows))
	}
	wantRows := append(failedRows, passedRows...)
	if got := rows(cold, 4); !bytes.Equal(got, wantRows) {
		t.Fatalf("rows from the aggregate:\n%s\nwant\n%s", got, wantRows)
	}
	if err := sc.ReadFailuresFirst(bytes.NewReader(wantRows), 0, 13, func(int, *evalengine.CaseResult) error { return nil }); err != nil {
		t.Fatalf("the rows do not read as failures first: %v", err)
	}

	builder := node()
	if err := builder.buildTail("eval-a"); err != nil {
		t.Fatal(err)
	}
	if builder.tails.built.Load() != 1 {
		t.Fatal("no tail built")
	}
	if err := builder.buildTail("eval-a"); err != nil || builder.tails.built.Load() != 1 {
		t.Fatalf("a second build of a stored tail: %v, %d built", err, builder.tails.built.Load())
	}

	warm := node() // nothing in memory: a restarted node
	if got := stream(warm); !bytes.Equal(got, want) {
		t.Fatalf("the stream from the tail differs:\n%s\nwant\n%s", got, want)
	}
	if got := rows(warm, 3); !bytes.Equal(got, wantRows) {
		t.Fatalf("rows from the tail:\n%s\nwant\n%s", got, wantRows)
	}
	if n := warm.records.aggs.Load(); n != 0 {
		t.Fatalf("a read with the tail aggregated %d times", n)
	}

	t.Run("a tail of other records is not used", func(t *testing.T) {
		h := &evalstore.TailHead{JobID: "eval-a", Records: j.Records + 1, Digest: strings.Repeat("0", 64), Cases: 13,
			Header: []byte("{}\n"), Summary: []byte("{}\n")}
		if err := s.PutTail(h, [][]byte{[]byte("{}\n")}); err != nil {
			t.Fatal(err)
		}
		stale := node()
		if got := stream(stale); !bytes.Equal(got, want) {
			t.Fatalf("with a stale tail the stream differs:\n%s", got)
		}
		if n := stale.records.aggs.Load(); n != 1 {
			t.Fatalf("with a stale tail the stream was aggregated %d times", n)
		}
		if err := stale.buildTail("eval-a"); err != nil || stale.tails.built.Load() != 1 {
			t.Fatalf("the stale tail was not rebuilt: %v", err)
		}
		if got := stream(node()); !bytes.Equal(got, want) {
			t.Fatal("the rebuilt tail differs")
		}
	})

	t.Run("refusals name the field", func(t *testing.T) {
		svc := node()
		for _, c := range []struct {
			req   api.Request
			field string
		}{
			{api.Request{Scope: "app", JobID: "eval-a", Limit: 0}, "limit"},
			{api.Request{Scope: "app", JobID: "eval-a", Limit: api.MaxResultCases + 1}, "limit"},
			{api.Request{Scope: "app", JobID: "eval-a", Limit: 1, Offset: -1}, "offset"},
			{api.Request{Scope: "app", JobID: "eval-a", Limit: 1, MaxBytes: -1}, "max_bytes"},
		} {
			rep := svc.resultCases(&c.req)
			if rep.Err == nil || rep.Err.Code != api.CodeInvalidRequest || !strings.HasPrefix(rep.Err.Detail, c.field) {
				t.Fatalf("%+v: %v", c.req, rep.Err)
			}
		}
		for _, c := range []struct {
			req  api.Request
			code string
		}{
			{api.Request{Scope: "app", JobID: "eval-a", Limit: 1, Offset: 13}, api.CodeInvalidRequest},
			{api.Request{Scope: "other", JobID: "eval-a", Limit: 1}, evalrecord.CodeNotFound},
		} {
			err := s.View(func(tx *evalstore.Tx) error {
				_, err := svc.casesPage(tx, &c.req, 500)
				return err
			})
			if e := api.AsError(err); e.Code != c.code {
				t.Fatalf("%+v: %v, want %s", c.req, err, c.code)
			}
		}
	})
}

// TestResultTail_PolicyChoosesWhenTailsAreBuilt: Config.ResultTails
// decides when a node asks for a job's tail. At completion the FSM's
// completion asks for it, read or not; on first read the completion asks
// nothing and the first read does (a restarted node's later reads then
// use the tail); never, neither does, and every read aggregates the job
// from its records, the same stream as from a tail.
func TestResultTail_PolicyChoosesWhenTailsAreBuilt(t *testing.T) {
	for _, c := range []struct {
		policy                 ResultTails
		atCompletion, fromRead int64
	}{
		{TailsAtCompletion, 1, 1},
		{TailsOnFirstRead, 0, 1},
		{TailsNever, 0, 0},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			f, s := newFSM(t)
			tails := newTailCache(c.policy)
			tails.watch(f, c.policy)
			j := cacheJob(t, f, 13, 1, nil)
			completeRecordsJob(t, f, s, j)
			if n := tails.asked.Load(); n != c.atCompletion {
				t.Fatalf("the completion asked for %d tails, want %d", n, c.atCompletion)
			}
			svc := &service{n: &Node{store: s, fsm: f}, digests: map[string]string{}, tails: tails}
			read := func(svc *service) *api.Reply {
				t.Helper()
				var rep *api.Reply
				if err := s.View(func(tx *evalstore.Tx) (err error) {
					rep, err = svc.casesPage(tx, &api.Request{Scope: "app", JobID: "eval-a", Limit: 13}, 1<<20)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return rep
			}
			want := read(svc)
			if n := tails.asked.Load(); n != c.fromRead {
				t.Fatalf("after a read %d tails were asked for, want %d", n, c.fromRead)
			}
			if svc.records.aggs.Load() != 1 {
				t.Fatalf("the read without a tail aggregated %d times", svc.records.aggs.Load())
			}
			// What the builder goroutine does with each job asked for.
			for len(tails.queue) > 0 {
				id := <-tails.queue
				if err := svc.buildTail(id); err != nil {
					t.Fatal(err)
				}
				tails.done(id)
			}
			restarted := &service{n: &Node{store: s, fsm: f}, digests: map[string]string{}, tails: newTailCache(c.policy)}
			if got := read(restarted); !bytes.Equal(got.Result, want.Result) {
				t.Fatalf("the rows after a restart differ:\n%s\nwant\n%s", got.Result, want.Result)
			}
			wantAggs := int64(0)
			if c.policy == TailsNever {
				wantAggs = 1
			}
			if n := restarted.records.aggs.Load(); n != wantAggs {
				t.Fatalf("a restarted node's read aggregated %d times, want %d", n, wantAggs)
			}
			if n := restarted.tails.asked.Load(); n != 0 {
				t.Fatalf("a restarted node's read asked for %d tails", n)
			}
		})
	}
	if _, err := resultTails("lazy"); !errors.Is(err, ErrInvalidResultTails) {
		t.Fatalf("an unknown policy: %v", err)
	}
}

// TestResultTail_SamplesWithoutTheSet: result_samples on a node that
// holds a job's tail but not its prepared set answers every task's
// sample line as a node with the set does; a sample that is its record's
// is answered without parsing the set, and one that is not (a lost task,
// a sample that does not decode) parses it once.
func TestResultTail_SamplesWithoutTheSet(t *testing.T) {
	f, s := newFSM(t)
	j := cacheJob(t, f, 13, 2, nil)
	completeRecordsJob(t, f, s, j)
	node := &Node{store: s, fsm: f}
	newService := func() *service {
		return &service{n: node, digests: map[string]string{}, tails: newTailCache(TailsAtCompletion)}
	}
	if err := newService().buildTail("eval-a"); err != nil {
		t.Fatal(err)
	}
	samples := func(svc *service, tasks ...int) []byte {
		t.Helper()
		rep := svc.resultSamples(&api.Request{Scope: "app", JobID: "eval-a", Tasks: tasks})
		if rep.Err != nil || rep.NextOffset != int64(len(tasks)) {
			t.Fatalf("tasks %v: %v (%d answered)", tasks, rep.Err, rep.NextOffset)
		}
		return rep.Result
	}
	withSet := newService()
	if err := s.View(func(tx *evalstore.Tx) error {
		_, err := withSet.records.get(tx, j)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for task := range 26 {
		want := samples(withSet, task)
		tail := newService()
		if got := samples(tail, task); !bytes.Equal(got, want) {
			t.Fatalf("task %d from the tail:\n%s\nwant\n%s", task, got, want)
		}
		record := task%5 != 4 && task != 1 // cacheJob: lost, and a sample that does not decode
		if n := tail.records.sets.Load(); (n == 0) != record {
			t.Fatalf("task %d (its record's sample: %t) parsed the set %d times", task, record, n)
		}
	}
	all := make([]int, 26)
	for i := range all {
		all[i] = 25 - i
	}
	tail := newService()
	if got, want := samples(tail, all...), samples(withSet, all...); !bytes.Equal(got, want) || tail.records.sets.Load() != 1 {
		t.Fatalf("every task from the tail (set parsed %d times):\n%s\nwant\n%s", tail.records.sets.Load(), got, want)
	}
}
