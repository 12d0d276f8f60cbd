package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{"adk ", "commit ", "go go1."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("version output %q lacks %q", out.String(), want)
		}
	}
}

func TestUsageErrorsExitOneWithOneLine(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"version", "extra"}, {"version", "--bogus"}} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		if code != exitError {
			t.Errorf("%v: exit %d, want %d", args, code, exitError)
		}
		lines := strings.Split(strings.TrimRight(errb.String(), "\n"), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "adk: ") {
			t.Errorf("%v: stderr %q, want one line starting with 'adk: '", args, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("%v: stdout %q, want empty", args, out.String())
		}
	}
}
