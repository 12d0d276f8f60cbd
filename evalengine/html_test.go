package evalengine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/fadcedab/adk/evalengine"
)

// hostileResult runs a set whose case ids, inputs, expected answers and
// tool names are markup, with one failing case (wrong answer and wrong
// second tool).
func hostileResult(t *testing.T) *evalengine.Result {
	t.Helper()
	set := mustSet(t, `{"id":"<svg onload=alert(1)>","version":"1","cases":[
		{"id":"<script>alert('id')</script>","turns":[{"input":"<img src=x onerror=alert(1)>",
		  "expected":{"response":"<script>","trajectory":["lookup","</td><script>alert(2)</script>"]}}]},
		{"id":"ok \" onmouseover=\"x","input":"q","expected":"fine","expected_trajectory":[]}]}`)
	a := &fakeAdapter{script: map[string]evalengine.TurnOutput{
		"<img src=x onerror=alert(1)>": {Output: "<b>bold</b> & \"quoted\"", Trajectory: []evalengine.ToolStep{
			{Tool: "lookup", CallID: "c1"}, {Tool: `<iframe src="javascript:alert(3)">`, CallID: "c2"}}},
		"q": {Output: "fine"},
	}}
	metrics := []evalengine.Metric{
		mustCriterion(t, "response", evalengine.CriterionExactResponse, 1, nil),
		mustCriterion(t, "<i>trajectory</i>", evalengine.CriterionToolTrajectory, 1, nil),
	}
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: a, Metrics: metrics, Options: opts(nil)})
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := evalengine.DecodeResult([]byte(stripTimings(t, r)))
	if err != nil {
		t.Fatal(err)
	}
	return fixed
}

// allowedTags is every element the report template writes itself.
var allowedTags = map[string]bool{
	"html": true, "head": true, "meta": true, "title": true, "style": true, "body": true, "header": true,
	"main": true, "h1": true, "h2": true, "h3": true, "h4": true, "section": true, "p": true, "span": true,
	"dl": true, "dt": true, "dd": true, "table": true, "thead": true, "tbody": true, "tr": true, "th": true,
	"td": true, "a": true, "details": true, "summary": true, "pre": true, "div": true, "del": true, "ins": true,
	"code": true, "strong": true, "ul": true, "li": true,
}

// assertInert tokenizes an HTML document and fails on any element the
// template does not write, any event-handler attribute, any script and any
// link that leaves the document.
func assertInert(t *testing.T, doc []byte) {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(doc))
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if !allowedTags[tok.Data] {
				t.Fatalf("element <%s> is not the template's", tok.Data)
			}
			for _, a := range tok.Attr {
				if strings.HasPrefix(a.Key, "on") || a.Key == "src" {
					t.Fatalf("attribute %s=%q on <%s>", a.Key, a.Val, tok.Data)
				}
				if a.Key == "href" && !strings.HasPrefix(a.Val, "#case-") {
					t.Fatalf("link %q leaves the document", a.Val)
				}
			}
		}
	}
}

func TestRenderHTML_HostileContentRendersAsText(t *testing.T) {
	res := hostileResult(t)
	base := hostileResult(t)
	cmp, err := evalengine.Compare(base, res, evalengine.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := evalengine.RenderHTML(res, cmp, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertInert(t, out)
	for _, want := range []string{
		"&lt;script&gt;alert(&#39;id&#39;)&lt;/script&gt;", // the case id
		"&lt;img src=x onerror=alert(1)&gt;",               // the input
		"&lt;/td&gt;&lt;script&gt;alert(2)&lt;/script&gt;", // the expected tool
		"&lt;iframe src=&#34;javascript:alert(3)&#34;&gt;", // the actual tool
		`<tr class="mismatch"><td class="num">2</td>`,      // the second call is marked
		"✗ first unmatched expected call; ✗ actual call in its place",
		"First trajectory mismatch at expected call 2",
		"&lt;i&gt;trajectory&lt;/i&gt;", // a metric id
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("report lacks %s", want)
		}
	}
}

func TestRenderHTML_GoldenDeterministicBounded(t *testing.T) {
	res := fixedResult(t, true)
	cmp, err := evalengine.Compare(fixedResult(t, false), res, evalengine.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := evalengine.RenderHTML(res, cmp, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := evalengine.RenderHTML(res, cmp, evalengine.ExportOptions{})
	if !bytes.Equal(out, again) {
		t.Fatal("rendering is not deterministic")
	}
	assertInert(t, out)
	for _, want := range []string{"Comparison with the baseline", "Case details", "<del>a2</del><ins>wrong</ins>", "response 0.0000 &lt; 1.0000"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	if bytes.Contains(out, []byte("http://")) || bytes.Contains(out, []byte("https://")) {
		t.Error("a self-contained report names no network address")
	}
	golden := filepath.Join("testdata", "golden", "result_with_comparison.html")
	if *update {
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("%s differs from the golden file", golden)
	}
	_, err = evalengine.RenderHTML(res, nil, evalengine.ExportOptions{MaxBytes: 100})
	wantCode(t, err, evalengine.CodeExportByteLimitExceeded)
	_, err = evalengine.RenderHTML(nil, nil, evalengine.ExportOptions{})
	wantCode(t, err, evalengine.CodeInvalidExportResult)
}

func TestDiffWords_SidesRebuildAndChangesAreMarked(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"the cat sat", "the dog sat"}, {"", "new"}, {"old", ""}, {"same", "same"},
		{"a  b\nc", "a b\n\nc d"}, {"héllo wörld", "héllo world"},
	} {
		var left, right strings.Builder
		for _, op := range evalengine.DiffWords(tc.a, tc.b) {
			if op.Op != '+' {
				left.WriteString(op.Text)
			}
			if op.Op != '-' {
				right.WriteString(op.Text)
			}
		}
		if left.String() != tc.a || right.String() != tc.b {
			t.Errorf("DiffWords(%q, %q) rebuilds %q, %q", tc.a, tc.b, left.String(), right.String())
		}
	}
	ops := evalengine.DiffWords("the cat sat", "the dog sat")
	if len(ops) != 4 || ops[1].Op != '-' || ops[1].Text != "cat" || ops[2].Op != '+' || ops[2].Text != "dog" {
		t.Fatalf("ops %+v", ops)
	}
}
