package report

import (
	"strings"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/internal/canonjson"
)

// responseText renders a turn's input, output or expectation as text for
// the HTML report: a string as itself, an object that is only a "response"
// or "text" string as that string, anything else as canonical JSON; nil is
// "".
func responseText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case map[string]any:
		for _, k := range []string{"response", "text"} {
			if s, ok := x[k].(string); ok && len(x) == 1 {
				return s
			}
		}
	}
	b, err := canonjson.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// expectedTools is the expected tool names of a sample's turns (each
// turn's expected "trajectory" or "tool_uses", as names or {tool|name}
// objects, concatenated); has is false when no turn states one. A case's
// top-level expected_trajectory is not in the result document.
func expectedTools(turns []evalcore.TurnResult) (names []string, has bool) {
	for _, t := range turns {
		m, ok := t.Expected.(map[string]any)
		if !ok {
			continue
		}
		v := m["trajectory"]
		if v == nil {
			v = m["tool_uses"]
		}
		l, ok := v.([]any)
		if !ok {
			continue
		}
		has = true
		for _, e := range l {
			switch x := e.(type) {
			case string:
				names = append(names, x)
			case map[string]any:
				n, _ := x["tool"].(string)
				if n == "" {
					n, _ = x["name"].(string)
				}
				names = append(names, n)
			}
		}
	}
	return names, has
}

// toolNames is the tool names of the tool calls in a trajectory.
func toolNames(items []evalcore.TrajectoryItem) []string {
	var out []string
	for _, it := range items {
		if it.Kind == "" || it.Kind == evalcore.KindToolCall {
			out = append(out, it.Tool)
		}
	}
	return out
}

// DiffOp is one span of a word diff: Op is '=' (both), '-' (expected
// only) or '+' (actual only).
type DiffOp struct {
	Op   byte
	Text string
}

// maxDiffCells bounds the LCS table; longer pairs diff as one replacement.
const maxDiffCells = 1 << 20

// DiffWords diffs two texts by words (whitespace runs are tokens too, so
// joining the spans of one side gives that side back). Deterministic.
func DiffWords(expected, actual string) []DiffOp {
	if expected == actual {
		if expected == "" {
			return nil
		}
		return []DiffOp{{'=', expected}}
	}
	a, b := diffTokens(expected), diffTokens(actual)
	if len(a)*len(b) > maxDiffCells {
		return appendOp(appendOp(nil, '-', expected), '+', actual)
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	w := len(b) + 1
	lcs := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	var out []DiffOp
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = appendOp(out, '=', a[i])
			i, j = i+1, j+1
		case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
			out = appendOp(out, '-', a[i])
			i++
		default:
			out = appendOp(out, '+', b[j])
			j++
		}
	}
	for ; i < len(a); i++ {
		out = appendOp(out, '-', a[i])
	}
	for ; j < len(b); j++ {
		out = appendOp(out, '+', b[j])
	}
	return out
}

func appendOp(ops []DiffOp, op byte, s string) []DiffOp {
	if s == "" {
		return ops
	}
	if n := len(ops); n > 0 && ops[n-1].Op == op {
		ops[n-1].Text += s
		return ops
	}
	return append(ops, DiffOp{op, s})
}

// diffTokens splits s into alternating runs of whitespace and non-whitespace.
func diffTokens(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		if i == 0 {
			continue
		}
		prev := s[i-1]
		if isSpace(rune(prev)) != isSpace(r) {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func isSpace(r rune) bool { return strings.ContainsRune(" \t\r\n", r) }
