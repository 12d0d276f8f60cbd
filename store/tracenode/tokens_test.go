package tracenode_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fadcedab/adk/store/tracenode"
)

// TestParseTokens_Scopes: the shared tokens file names each principal's
// eval scopes (default: its own name); malformed lines are refused with
// their line number and nothing is loaded.
func TestParseTokens_Scopes(t *testing.T) {
	file := "# tokens\n" + tracenode.HashToken("tok-a") + " alice scopes=team-a,shared\n\n" + tracenode.HashToken("tok-b") + " bob\n"
	toks, err := tracenode.ParseTokens([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := toks.Lookup("tok-a"); !ok || id.Principal != "alice" || !slices.Equal(id.Scopes, []string{"team-a", "shared"}) {
		t.Fatalf("alice: %+v %v", id, ok)
	}
	if id, ok := toks.Lookup("tok-b"); !ok || !slices.Equal(id.Scopes, []string{"bob"}) || !id.HasScope("bob") || id.HasScope("team-a") {
		t.Fatalf("bob: %+v %v", id, ok)
	}
	for _, tok := range []string{"", "tok-c", strings.Repeat("x", tracenode.MaxTokenBytes+1)} {
		if _, ok := toks.Lookup(tok); ok {
			t.Fatalf("token %q accepted", tok)
		}
	}
	h := tracenode.HashToken("x")
	for _, bad := range []string{
		h + " alice scopes=",
		h + " alice scopes=a,,b",
		h + " alice teams=a",
		h + " alice scopes=a extra",
		h + " al.ice",
		h + " alice\n" + h + " bob",
		"abc alice",
	} {
		if _, err := tracenode.ParseTokens([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
