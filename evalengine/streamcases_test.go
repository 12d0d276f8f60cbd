package evalengine_test

import (
	"bytes"
	"errors"
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
