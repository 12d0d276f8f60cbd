package evalengine_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// splitStream cuts a complete stream into its header line, its case
// lines (the n lines before the summary) and its summary line.
func splitStream(t *testing.T, data []byte, n int) (header, cases, summary []byte) {
	t.Helper()
	lines := bytes.SplitAfter(data, []byte{'\n'})
	lines = lines[:len(lines)-1] // after the last newline
	if len(lines) < n+2 {
		t.Fatalf("%d lines for %d cases", len(lines), n)
	}
	return lines[0], bytes.Join(lines[len(lines)-1-n:len(lines)-1], nil), lines[len(lines)-1]
}

// TestStreamCases_ReadsTheCasesOfOpenStreamFile: the cases of a stream
// read from its header, case lines and summary alone are StreamFile's
// (the same case, in order, Samples nil), and its summary too; every
// piece out of place or changed is refused with its reason.
func TestStreamCases_ReadsTheCasesOfOpenStreamFile(t *testing.T) {
	const n = 50
	data := sideStream(t, n, 3, false)
	f, err := evalengine.OpenStreamFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := f.Cases(func(*evalengine.CaseResult) bool { return false }, func(ci int, c *evalengine.CaseResult) error {
		want = append(want, mustJSON(t, c))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	header, cases, summary := splitStream(t, data, n)
	sc, err := evalengine.OpenStreamCases(header, summary)
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, sc.Summary) != mustJSON(t, f.Summary) || sc.Header.CaseCount != n {
		t.Fatalf("summary %s, want %s", mustJSON(t, sc.Summary), mustJSON(t, f.Summary))
	}
	var got []string
	if err := sc.Read(bytes.NewReader(cases), func(ci int, c *evalengine.CaseResult) error {
		if ci != len(got) || c.Samples != nil {
			t.Fatalf("case %d at %d, samples %v", ci, len(got), c.Samples)
		}
		got = append(got, mustJSON(t, c))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d cases", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("case %d: %s, want %s", i, got[i], want[i])
		}
	}
	stop := errors.New("stop")
	if err := sc.Read(bytes.NewReader(cases), func(int, *evalengine.CaseResult) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}

	caseLines := bytes.SplitAfter(cases, []byte{'\n'})
	flipped := bytes.Replace(cases, []byte(`"passed":true`), []byte(`"passed":false`), 1)
	for _, c := range []struct {
		name             string
		header, summary  []byte
		cases            []byte
		reason, whichErr string
	}{
		{"summary as header", summary, summary, cases, "invalid_header", "open"},
		{"header as summary", header, header, cases, "invalid_summary", "open"},
		{"another set's summary", header, bytes.Replace(summary, []byte(`"eval_set_version":"`), []byte(`"eval_set_version":"x`), 1), cases, "summary_mismatch", "open"},
		{"a case missing", header, summary, bytes.Join(caseLines[:n-1], nil), "missing_cases", "read"},
		{"cases out of order", header, summary, bytes.Join(append([][]byte{caseLines[1], caseLines[0]}, caseLines[2:]...), nil), "case_out_of_order", "read"},
		{"a line after the cases", header, summary, append(append([]byte{}, cases...), summary...), "line_after_cases", "read"},
		{"a sample line", header, summary, bytes.SplitAfter(data, []byte{'\n'})[1], "invalid_case", "read"},
		{"a verdict changed", header, summary, flipped, "summary_mismatch", "read"},
		{"truncated", header, summary, cases[:len(cases)-1], "truncated_line", "read"},
	} {
		sc, err := evalengine.OpenStreamCases(c.header, c.summary)
		if c.whichErr == "read" {
			if err != nil {
				t.Fatalf("%s: open: %v", c.name, err)
			}
			err = sc.Read(bytes.NewReader(c.cases), func(int, *evalengine.CaseResult) error { return nil })
		}
		if evalengine.ErrorCode(err) != "invalid_eval_stream" || !bytes.Contains([]byte(err.Error()), []byte(c.reason)) {
			t.Errorf("%s: %v, want invalid_eval_stream %s", c.name, err, c.reason)
		}
	}
}

// casesOf reads every case of a stream through StreamCases.Read (copies,
// Samples nil).
func casesOf(t *testing.T, sc *evalengine.StreamCases, cases []byte) []evalengine.CaseResult {
	t.Helper()
	var out []evalengine.CaseResult
	if err := sc.Read(bytes.NewReader(cases), func(_ int, c *evalengine.CaseResult) error {
		out = append(out, *c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStreamCases_ReadRangeReadsItsLinesOnly: ReadRange of case lines
// from..to-1 gives Read's cases from..to-1, from exactly those lines;
// lines of other cases, a line after them or a range outside the cases
// are refused; a range short of every case line does not count the
// passed cases (the summary's count is Read's to check).
func TestStreamCases_ReadRangeReadsItsLinesOnly(t *testing.T) {
	const n = 30
	data := sideStream(t, n, 2, false)
	header, cases, summary := splitStream(t, data, n)
	sc, err := evalengine.OpenStreamCases(header, summary)
	if err != nil {
		t.Fatal(err)
	}
	all := casesOf(t, sc, cases)
	lines := bytes.SplitAfter(cases, []byte{'\n'})[:n]
	for _, r := range [][2]int{{0, n}, {10, 20}, {n - 1, n}, {7, 7}, {0, 1}} {
		var got []int
		err := sc.ReadRange(bytes.NewReader(bytes.Join(lines[r[0]:r[1]], nil)), r[0], r[1], func(ci int, c *evalengine.CaseResult) error {
			if mustJSON(t, c) != mustJSON(t, &all[ci]) {
				t.Fatalf("range %v: case %d differs", r, ci)
			}
			got = append(got, ci)
			return nil
		})
		if err != nil || len(got) != r[1]-r[0] || len(got) > 0 && got[0] != r[0] {
			t.Errorf("range %v: %v, cases %v", r, err, got)
		}
	}
	// A verdict changed in a range is not counted (Read counts it).
	flipped := bytes.Replace(lines[9], []byte(`"passed":false`), []byte(`"passed":true`), 1)
	if bytes.Equal(flipped, lines[9]) {
		t.Fatal("case 9 does not fail")
	}
	if err := sc.ReadRange(bytes.NewReader(flipped), 9, 10, func(int, *evalengine.CaseResult) error { return nil }); err != nil {
		t.Errorf("a range of one changed verdict: %v", err)
	}
	for _, c := range []struct {
		name     string
		from, to int
		lines    []byte
		reason   string
	}{
		{"another case's line", 10, 11, lines[11], "case_out_of_order"},
		{"a line after the range", 10, 11, bytes.Join(lines[10:12], nil), "line_after_cases"},
		{"a line short", 10, 12, lines[10], "missing_cases"},
		{"past the cases", n - 1, n + 1, lines[n-1], "case_out_of_range"},
		{"backwards", 5, 4, nil, "case_out_of_range"},
	} {
		err := sc.ReadRange(bytes.NewReader(c.lines), c.from, c.to, func(int, *evalengine.CaseResult) error { return nil })
		if evalengine.ErrorCode(err) != "invalid_eval_stream" || !bytes.Contains([]byte(err.Error()), []byte(c.reason)) {
			t.Errorf("%s: %v, want invalid_eval_stream %s", c.name, err, c.reason)
		}
	}
}

// TestStreamCases_ReadFailuresFirstChecksTheOrder: the case lines of
// rows of the failures-first order (the failed cases, then the passed,
// each in case order) read as those cases, from any row; lines out of
// that order, a passed case among the failed rows, a line short or over
// are refused with their reason.
func TestStreamCases_ReadFailuresFirstChecksTheOrder(t *testing.T) {
	const n = 30
	data := sideStream(t, n, 2, false)
	header, cases, summary := splitStream(t, data, n)
	sc, err := evalengine.OpenStreamCases(header, summary)
	if err != nil {
		t.Fatal(err)
	}
	all := casesOf(t, sc, cases)
	lines := bytes.SplitAfter(cases, []byte{'\n'})[:n]
	var order []int // case indexes, failures first
	for ci := range all {
		if !all[ci].Passed {
			order = append(order, ci)
		}
	}
	failed := len(order)
	for ci := range all {
		if all[ci].Passed {
			order = append(order, ci)
		}
	}
	if failed == 0 || failed == n {
		t.Fatalf("%d of %d cases failed: the test wants both", failed, n)
	}
	rows := func(from, to int) []byte {
		var b []byte
		for _, ci := range order[from:to] {
			b = append(b, lines[ci]...)
		}
		return b
	}
	for _, r := range [][2]int{{0, n}, {0, failed}, {failed, n}, {failed - 1, failed + 2}, {n - 1, n}, {3, 3}} {
		var got []int
		err := sc.ReadFailuresFirst(bytes.NewReader(rows(r[0], r[1])), r[0], r[1], func(ci int, c *evalengine.CaseResult) error {
			if mustJSON(t, c) != mustJSON(t, &all[ci]) {
				t.Fatalf("rows %v: case %d differs", r, ci)
			}
			got = append(got, ci)
			return nil
		})
		if err != nil || !slices.Equal(got, order[r[0]:r[1]]) {
			t.Errorf("rows %v: %v, cases %v, want %v", r, err, got, order[r[0]:r[1]])
		}
	}
	swapped := append(append([]byte{}, lines[order[1]]...), lines[order[0]]...)
	for _, c := range []struct {
		name     string
		from, to int
		lines    []byte
		reason   string
	}{
		{"two failed rows swapped", 0, 2, swapped, "case_out_of_order"},
		{"a passed case first", 0, 1, lines[order[failed]], "case_out_of_order"},
		{"a failed case last", n - 1, n, lines[order[0]], "case_out_of_order"},
		{"a line short", 0, 2, lines[order[0]], "missing_cases"},
		{"a line over", 0, 1, rows(0, 2), "line_after_cases"},
		{"past the cases", n - 1, n + 1, rows(n-1, n), "case_out_of_range"},
	} {
		err := sc.ReadFailuresFirst(bytes.NewReader(c.lines), c.from, c.to, func(int, *evalengine.CaseResult) error { return nil })
		if evalengine.ErrorCode(err) != "invalid_eval_stream" || !bytes.Contains([]byte(err.Error()), []byte(c.reason)) {
			t.Errorf("%s: %v, want invalid_eval_stream %s", c.name, err, c.reason)
		}
	}
}

// TestStreamCases_ReadSamplesReadsOneCase: ReadSamples of each case from
// a stream's sample lines gives StreamFile's samples of that case (the
// same samples, each once), also when another case's line does not
// start as the writer starts one (decoded to find its case); every
// disagreement with the case or the stream is refused with its reason;
// fn's error stops the read and is returned as is.
func TestStreamCases_ReadSamplesReadsOneCase(t *testing.T) {
	const n, s = 20, 3
	data := sideStream(t, n, s, false)
	f, err := evalengine.OpenStreamFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{}
	if err := f.Cases(nil, func(ci int, c *evalengine.CaseResult) error {
		for i := range c.Samples {
			want[ci] = append(want[ci], mustJSON(t, &c.Samples[i]))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	header, cases, summary := splitStream(t, data, n)
	sc, err := evalengine.OpenStreamCases(header, summary)
	if err != nil {
		t.Fatal(err)
	}
	all := casesOf(t, sc, cases)
	lines := bytes.SplitAfter(data, []byte{'\n'})
	sampleLines := lines[1 : 1+n*s]
	samples := bytes.Join(sampleLines, nil)
	// Case 4's first line with its keys in another order.
	other := bytes.Replace(sampleLines[4], []byte(`{"type":"sample","case_index":4,`), []byte(`{"case_index":4,"type":"sample",`), 1)
	reordered := bytes.Join(append([][]byte{other}, append(sampleLines[:4:4], sampleLines[5:]...)...), nil)
	read := func(in []byte, ci int, c *evalengine.CaseResult) ([]string, error) {
		got := make([]string, s)
		err := sc.ReadSamples(bytes.NewReader(in), ci, c, func(sm *evalengine.SampleResult) error {
			got[sm.SampleIndex] = mustJSON(t, sm)
			return nil
		})
		return got, err
	}
	for ci := range n {
		for _, in := range [][]byte{samples, reordered} {
			got, err := read(in, ci, &all[ci])
			if err != nil {
				t.Fatalf("case %d: %v", ci, err)
			}
			for si := range s {
				if got[si] != want[ci][si] {
					t.Fatalf("case %d sample %d: %.200s, want %.200s", ci, si, got[si], want[ci][si])
				}
			}
		}
	}
	stop := errors.New("stop")
	calls := 0
	if err := sc.ReadSamples(bytes.NewReader(samples), 3, &all[3], func(*evalengine.SampleResult) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("fn's error: %v after %d calls", err, calls)
	}

	renamed := all[3]
	renamed.CaseID = "another"
	miscounted := all[3]
	miscounted.PassedSampleCount = s - miscounted.PassedSampleCount
	without := func(i int) []byte {
		return bytes.Join(append(append([][]byte{}, sampleLines[:i]...), sampleLines[i+1:]...), nil)
	}
	for _, c := range []struct {
		name   string
		in     []byte
		c      *evalengine.CaseResult
		reason string
	}{
		{"a sample twice", append(append([]byte{}, samples...), sampleLines[3]...), &all[3], "duplicate_sample"},
		{"a sample missing", without(n + 3), &all[3], "incomplete"},
		{"another case's sample missing", without(n + 4), &all[3], "incomplete"},
		{"another case id", samples, &renamed, "case_mismatch"},
		{"another passed count", samples, &miscounted, "case_mismatch"},
		{"a case line", append(append([]byte{}, samples...), lines[1+n*s]...), &all[3], "invalid_sample"},
		{"truncated", samples[:len(samples)-1], &all[3], "truncated_line"},
	} {
		_, err := read(c.in, 3, c.c)
		if evalengine.ErrorCode(err) != "invalid_eval_stream" || !bytes.Contains([]byte(err.Error()), []byte(c.reason)) {
			t.Errorf("%s: %v, want invalid_eval_stream %s", c.name, err, c.reason)
		}
	}
}

// TestStreamCases_ReadCaseSamplesReadsItsLinesOnly: ReadCaseSamples of a
// range of a case's samples, given exactly those sample lines in sample
// order, gives StreamFile's samples of the range; a line out of place,
// missing, extra or disagreeing with the case is refused with its
// reason; fn's error stops the read and is returned as is.
func TestStreamCases_ReadCaseSamplesReadsItsLinesOnly(t *testing.T) {
	const n, s = 20, 3
	data := sideStream(t, n, s, false)
	f, err := evalengine.OpenStreamFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{}
	if err := f.Cases(nil, func(ci int, c *evalengine.CaseResult) error {
		for i := range c.Samples {
			want[ci] = append(want[ci], mustJSON(t, &c.Samples[i]))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	header, cases, summary := splitStream(t, data, n)
	sc, err := evalengine.OpenStreamCases(header, summary)
	if err != nil {
		t.Fatal(err)
	}
	all := casesOf(t, sc, cases)
	// Each case's sample lines by sample index, as a store reading a
	// sample by its task index answers them.
	lines := bytes.SplitAfter(data, []byte{'\n'})
	byCase := make([][][]byte, n)
	for _, l := range lines[1 : 1+n*s] {
		var sl struct {
			CaseIndex int `json:"case_index"`
			Sample    struct {
				SampleIndex int `json:"sample_index"`
			} `json:"sample"`
		}
		if err := json.Unmarshal(l, &sl); err != nil {
			t.Fatal(err)
		}
		if byCase[sl.CaseIndex] == nil {
			byCase[sl.CaseIndex] = make([][]byte, s)
		}
		byCase[sl.CaseIndex][sl.Sample.SampleIndex] = l
	}
	read := func(in []byte, ci int, c *evalengine.CaseResult, from, to int) ([]string, error) {
		var got []string
		err := sc.ReadCaseSamples(bytes.NewReader(in), ci, c, from, to, func(sm *evalengine.SampleResult) error {
			got = append(got, mustJSON(t, sm))
			return nil
		})
		return got, err
	}
	for ci := range n {
		for _, r := range [][2]int{{0, s}, {1, s}, {0, 1}, {2, 3}, {1, 1}} {
			got, err := read(bytes.Join(byCase[ci][r[0]:r[1]], nil), ci, &all[ci], r[0], r[1])
			if err != nil {
				t.Fatalf("case %d samples %v: %v", ci, r, err)
			}
			if len(got) != r[1]-r[0] {
				t.Fatalf("case %d samples %v: %d samples", ci, r, len(got))
			}
			for i := range got {
				if got[i] != want[ci][r[0]+i] {
					t.Fatalf("case %d sample %d: %.200s, want %.200s", ci, r[0]+i, got[i], want[ci][r[0]+i])
				}
			}
		}
	}
	case3 := bytes.Join(byCase[3], nil)
	stop := errors.New("stop")
	calls := 0
	if err := sc.ReadCaseSamples(bytes.NewReader(case3), 3, &all[3], 0, s, func(*evalengine.SampleResult) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("fn's error: %v after %d calls", err, calls)
	}
	renamed := all[3]
	renamed.CaseID = "another"
	miscounted := all[3]
	miscounted.PassedSampleCount = s - miscounted.PassedSampleCount
	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }
	for _, c := range []struct {
		name     string
		in       []byte
		c        *evalengine.CaseResult
		from, to int
		reason   string
	}{
		{"samples out of order", join(byCase[3][1], byCase[3][0], byCase[3][2]), &all[3], 0, s, "sample_out_of_order"},
		{"another case's sample", join(byCase[3][0], byCase[4][1], byCase[3][2]), &all[3], 0, s, "sample_out_of_order"},
		{"a sample missing", join(byCase[3][0], byCase[3][1]), &all[3], 0, s, "incomplete"},
		{"a line too many", join(byCase[3][0], byCase[3][1]), &all[3], 0, 1, "line_after_samples"},
		{"another case id", case3, &renamed, 0, s, "case_mismatch"},
		{"another passed count", case3, &miscounted, 0, s, "case_mismatch"},
		{"a case line", join(byCase[3][0], lines[1+n*s]), &all[3], 0, 2, "invalid_sample"},
		{"truncated", case3[:len(case3)-1], &all[3], 0, s, "truncated_line"},
		{"a range past the case", case3, &all[3], 0, s + 1, "sample_out_of_range"},
	} {
		_, err := read(c.in, 3, c.c, c.from, c.to)
		if evalengine.ErrorCode(err) != "invalid_eval_stream" || !bytes.Contains([]byte(err.Error()), []byte(c.reason)) {
			t.Errorf("%s: %v, want invalid_eval_stream %s", c.name, err, c.reason)
		}
	}
}
