package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestVersion_Stamped: the ldflags stamps (-X main.commit, main.tag) win
// over the build info, which -trimpath and -buildvcs=false builds lack.
func TestVersion_Stamped(t *testing.T) {
	oldC, oldT := commit, tag
	t.Cleanup(func() { commit, tag = oldC, oldT })
	commit, tag = "0123abc-dirty", "v0.3.0"
	var out bytes.Buffer
	if code := run([]string{"version", "--json"}, &out, io.Discard); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out.String(), `"commit":"0123abc-dirty","tag":"v0.3.0"`) {
		t.Errorf("version --json %s", out.String())
	}
}
