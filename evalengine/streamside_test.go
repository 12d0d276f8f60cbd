package evalengine_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// sideStream is a complete jsonl result of n cases × s samples made from
// the golden stream's two cases (case-I; every tenth fails unless
// allPass), the samples written sample index first, as a run finishes
// them.
func sideStream(t testing.TB, n, s int, allPass bool) []byte {
	t.Helper()
	r := goldenStreamResult(t)
	var buf bytes.Buffer
	set := &evalengine.Set{ID: r.EvalSetID, Version: r.EvalSetVersion, Cases: make([]evalengine.Case, n)}
	hdr := evalengine.NewStreamHeader(set, s, nil)
	sw, err := evalengine.NewStreamWriter(&buf, &hdr, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	caseOf := func(i int) (evalengine.CaseResult, string) {
		if i%10 == 9 && !allPass {
			return r.Cases[1], "case-" + itoa(i)
		}
		return r.Cases[0], "case-" + itoa(i)
	}
	for si := range s {
		for i := range n {
			c, id := caseOf(i)
			smp := c.Samples[0]
			smp.CaseID, smp.SampleIndex = id, si
			smp.SampleID = evalengine.SampleID(r.EvalSetID, r.EvalSetVersion, id, si)
			if err := sw.WriteSample(i, &smp); err != nil {
				t.Fatal(err)
			}
		}
	}
	sum := *r
	sum.Cases = make([]evalengine.CaseResult, n)
	failed := 0
	for i := range n {
		c, id := caseOf(i)
		c.CaseID, c.SampleCount, c.PassedSampleCount = id, s, 0
		if c.Samples[0].Passed {
			c.PassedSampleCount = s
		}
		c.Samples = nil
		sum.Cases[i] = c
		if !c.Passed {
			failed++
		}
	}
	sum.CaseCount, sum.PassedCaseCount, sum.SampleCount = n, n-failed, s
	if err := sw.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sideCost reads data as a comparison side and returns what it kept
// (live heap after a GC) and what it allocated, per case.
func sideCost(t *testing.T, data []byte, n int, read func([]byte) (any, error)) (kept, mallocs float64) {
	t.Helper()
	// Three reads: what else the process does meanwhile moves one read's
	// figures. Allocations only add (the least of three), but the live
	// heap moves both ways: a goroutine an earlier test left winding down
	// frees its memory during a read as well as it allocates (under -race,
	// with the package's tests before it, the least of three once took the
	// indexed side for 40 bytes a case against its ~220), so kept is the
	// median of three.
	var ks [3]float64
	for i := range ks {
		k, m := sideCostOnce(t, data, n, read)
		ks[i] = k
		if i == 0 || m < mallocs {
			mallocs = m
		}
	}
	slices.Sort(ks[:])
	return ks[1], mallocs
}

// sideCostOnce measures one read. Two collections before each reading of
// the heap: the first moves sync.Pool contents to the victim caches,
// where they still count as live, the second frees them, so buffers
// pooled on whichever Ps the read ran on are not taken for what the side
// keeps.
func sideCostOnce(t *testing.T, data []byte, n int, read func([]byte) (any, error)) (kept, mallocs float64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	side, err := read(data)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(side)
	runtime.KeepAlive(data)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n), float64(after.Mallocs-before.Mallocs) / float64(n)
}

// TestReadStreamSide_MemoryPerCase: a comparison side read from a stream
// keeps O(1) bytes a case whatever the samples (no 24-byte-a-sample
// index): twice the cases cost the same per case, allocations included,
// and four samples a case keep what one does. StreamSide over
// OpenStreamFile, which a report needs, keeps the index besides.
func TestReadStreamSide_MemoryPerCase(t *testing.T) {
	read := func(data []byte) (any, error) {
		return evalengine.ReadStreamSide(bytes.NewReader(data))
	}
	// What `adk eval run --baseline` held before: the file's index and
	// the side.
	indexed := func(data []byte) (any, error) {
		f, err := evalengine.OpenStreamFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, err
		}
		s, err := evalengine.StreamSide(f)
		return []any{f, s}, err
	}
	// Few lines: the test runs under -race in CI, where each strict
	// sample decode is slow.
	const n = 600
	one, two, four := sideStream(t, n, 1, false), sideStream(t, 2*n, 1, false), sideStream(t, n, 4, false)
	k1, m1 := sideCost(t, one, n, read)
	k2, m2 := sideCost(t, two, 2*n, read)
	k4, m4 := sideCost(t, four, n, read)
	ki, _ := sideCost(t, four, n, indexed)
	t.Logf("per case: %d cases × 1 sample keep %.0f B in %.1f allocations; %d × 1: %.0f B, %.1f; %d × 4: %.0f B, %.1f; indexed, %d × 4: %.0f B", n, k1, m1, 2*n, k2, m2, n, k4, m4, n, ki)
	// A side record is ~72 bytes and the case id's copy.
	const maxKept = 128
	for _, k := range []float64{k1, k2, k4} {
		if k > maxKept {
			t.Errorf("a side keeps %.0f bytes a case, want at most %d", k, maxKept)
		}
	}
	if m2 > m1*1.1 || m2 < m1*0.9 {
		t.Errorf("allocations a case grow with the cases: %.1f at %d cases, %.1f at %d", m1, n, m2, 2*n)
	}
	// (The index would add 96.)
	if k4 > k1+24 {
		t.Errorf("four samples a case keep %.0f bytes a case against one sample's %.0f: the side grows with the samples", k4, k1)
	}
	// The indexed reader, for contrast, keeps its 24 bytes a sample.
	if ki < k4+4*20 {
		t.Errorf("the indexed side kept %.0f bytes a case, the read one %.0f: the test no longer sees the index", ki, k4)
	}
}

// TestRenderStream_HTMLComparisonPaged: the html page of a streamed
// result with a baseline comparison whose case-changes table does not fit
// the page (MaxBytes, lowered here: the 16 MiB default needs ~100,000
// baseline cases) is one page within the bound instead of
// export_byte_limit_exceeded. It shows the regressions first, then the
// failed cases, then the comparison's other rows, then passed cases,
// each only when everything before it fitted, under notes with the
// counts. (A page that fits is RenderHTML's bytes:
// TestRenderStream_ByteIdenticalToRender.)
func TestRenderStream_HTMLComparisonPaged(t *testing.T) {
	const n = 100
	cur := sideStream(t, n, 1, false)
	// The baseline: 2n cases that all passed, so the current run's
	// failed cases and its missing ones (case-200...) regress.
	base, err := evalengine.ReadStreamSide(bytes.NewReader(sideStream(t, 2*n, 1, true)))
	if err != nil {
		t.Fatal(err)
	}
	curSide, err := evalengine.ReadStreamSide(bytes.NewReader(cur))
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := evalengine.CompareSides(base, curSide, evalengine.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	regs := 0
	for _, d := range cmp.CaseDiffs {
		if d.Regression {
			regs++
		}
	}
	if regs != n+n/10 || len(cmp.CaseDiffs) != 2*n {
		t.Fatalf("%d regressions of %d rows", regs, len(cmp.CaseDiffs))
	}
	f, err := evalengine.OpenStreamFile(bytes.NewReader(cur), int64(len(cur)))
	if err != nil {
		t.Fatal(err)
	}
	render := func(max int) (string, error) {
		var out bytes.Buffer
		err := evalengine.RenderStreamCompared(&out, f, cmp, evalengine.FormatHTML, evalengine.ExportOptions{MaxBytes: max})
		return out.String(), err
	}
	whole, err := render(0)
	if err != nil || strings.Contains(whole, `class="paged"`) {
		t.Fatalf("a page that fits is paged: %v", err)
	}
	diffRE := regexp.MustCompile(`<tr><td>case-(\d+)</td><td><span class="badge \w+">\w+</span></td><td><span class="badge \w+">\w+</span></td><td>\w+</td><td>(<span class="badge REGRESSION">|ok)`)
	caseRE := regexp.MustCompile(`<tr><td><a href="#case-\d+">case-\d+</a></td><td><span class="badge (\w+)">`)
	// Bounds from a page with a few regressions to one short of the
	// whole: every stage of the page is seen cut short. (Each render
	// decodes the samples again: few, as the test runs under -race.)
	stages := map[string]bool{}
	for _, frac := range []float64{0.03, 0.1, 0.17, 0.26, 0.6, 0.97} {
		max := int(frac * float64(len(whole)))
		page, err := render(max)
		if err != nil {
			t.Fatalf("bound %d: %v", max, err)
		}
		if len(page) > max || !strings.HasSuffix(page, "</html>\n") {
			t.Fatalf("bound %d: %d bytes, ends %q", max, len(page), page[len(page)-10:])
		}
		shownRegs, shownOthers := 0, 0
		for _, m := range diffRE.FindAllStringSubmatch(page, -1) {
			if m[2] == "ok" {
				shownOthers++
			} else if shownOthers > 0 {
				t.Fatalf("bound %d: a regression after another row", max)
			} else {
				shownRegs++
			}
		}
		shownFailed, shownPassed := 0, 0
		for _, m := range caseRE.FindAllStringSubmatch(page, -1) {
			if m[1] == "passed" {
				shownPassed++
			} else {
				shownFailed++
			}
		}
		what := fmt.Sprintf("bound %d: %d/%d regressions, %d/%d failed, %d other rows, %d passed", max, shownRegs, regs, shownFailed, n/10, shownOthers, shownPassed)
		t.Log(what)
		// Each part only once the one before it is whole.
		others := len(cmp.CaseDiffs) - regs
		switch {
		case shownRegs == 0:
			t.Fatal(what)
		case shownRegs < regs:
			stages["regressions"] = shownFailed+shownOthers+shownPassed == 0
		case shownFailed < n/10:
			stages["failed"] = shownOthers+shownPassed == 0
		case shownOthers < others:
			stages["others"] = shownPassed == 0
		default:
			stages["passed"] = shownPassed < n-n/10
		}
		for stage, ok := range stages {
			if !ok {
				t.Fatalf("%s: cut short at %s, yet more is shown", what, stage)
			}
		}
		if shown := shownRegs + shownOthers; shown < len(cmp.CaseDiffs) {
			note := fmt.Sprintf("This table shows %d of %d baseline cases</strong>", shown, len(cmp.CaseDiffs))
			counts := fmt.Sprintf("Regressions come first (%d of %d shown), then the other cases (%d of %d shown)", shownRegs, regs, shownOthers, others)
			if !strings.Contains(page, note) || !strings.Contains(page, counts) || !strings.Contains(page, "adk eval compare BASELINE RESULT.jsonl --format markdown") {
				t.Fatalf("%s: the comparison's note is missing or wrong (want %q, %q)", what, note, counts)
			}
		} else if strings.Contains(page, "baseline cases</strong>") {
			t.Fatalf("%s: a note on a whole comparison table", what)
		}
		if shown := shownFailed + shownPassed; !strings.Contains(page, fmt.Sprintf("This page shows %d of %d cases</strong>", shown, n)) {
			t.Fatalf("%s: the cases' note is missing or wrong", what)
		}
	}
	if len(stages) != 4 {
		t.Fatalf("stages cut short: %v, want all four", stages)
	}
	// Not even the page without a row fits: typed.
	_, err = render(3000)
	wantCode(t, err, evalengine.CodeExportByteLimitExceeded)
}

// goldenStreamResult is the golden jsonl stream (testdata/golden/result.jsonl)
// read back as a result: the two cases the generated streams are made from.
func goldenStreamResult(t testing.TB) *evalengine.Result {
	t.Helper()
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := evalengine.ReadStream(bytes.NewReader(golden))
	if err != nil {
		t.Fatal(err)
	}
	r, err := evalengine.StreamToResult(st)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
