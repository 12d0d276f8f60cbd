package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goModReplaces returns the local directories go.mod's replace directives
// name (one-line and block form), keyed by the module they replace.
func goModReplaces(t *testing.T, goMod string) map[string]string {
	t.Helper()
	out := map[string]string{}
	inBlock := false
	for _, line := range strings.Split(goMod, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case line == "replace (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "replace "):
			line = strings.TrimPrefix(line, "replace ")
		case !inBlock:
			continue
		}
		old, repl, ok := strings.Cut(line, "=>")
		if !ok {
			t.Fatalf("go.mod: replace %q", line)
		}
		out[strings.Fields(old)[0]] = strings.Fields(repl)[0]
	}
	return out
}

// TestReadme_InstallingWorksWithGoModReplaces holds the README's install
// line to go.mod: the go command refuses `go install PKG@VERSION` for a
// module whose go.mod has a replace directive ("It must not contain
// directives that would cause it to be interpreted differently than if it
// were the main module"), so while go.mod replaces anything the README
// must not offer that way, nor say go.mod has no replace; and each copy a
// replace points to keeps its upstream LICENSE and says why it is there.
// (Checked by hand against a file proxy holding this module: go 1.26
// refuses `go install github.com/fadcedab/adk/cmd/adk@v0.0.1` with that
// message; a module requiring adk builds with the upstream versions.)
// The checkout's own build (`go install ./cmd/adk`, `go build`) is what
// every test of this package that runs the binary builds.
func TestReadme_InstallingWorksWithGoModReplaces(t *testing.T) {
	root := repoRoot(t)
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	replaces := goModReplaces(t, string(goMod))
	for mod, dir := range replaces {
		if !strings.HasPrefix(dir, "./") {
			continue
		}
		for _, f := range []string{"LICENSE", "ADK-PATCH.md", "go.mod"} {
			if _, err := os.Stat(filepath.Join(root, dir, f)); err != nil {
				t.Errorf("replace %s => %s: %v", mod, dir, err)
			}
		}
	}
	text := string(readme)
	start := strings.Index(text, "\nInstalling:")
	if start < 0 {
		t.Fatal("README has no Installing: paragraph")
	}
	para := text[start+1:]
	if end := strings.Index(para, "\n\n"); end >= 0 {
		para = para[:end]
	}
	para = strings.Join(strings.Fields(para), " ")
	if !strings.Contains(para, "`go install ./cmd/adk`") {
		t.Errorf("the Installing paragraph does not give the checkout's install, `go install ./cmd/adk`:\n%s", para)
	}
	if len(replaces) == 0 {
		return
	}
	// Each sentence that names a versioned install must say it does not work.
	versioned := regexp.MustCompile("go install [^`]*@")
	for _, sentence := range strings.SplitAfter(para, ". ") {
		if versioned.MatchString(sentence) && !strings.Contains(sentence, "does not work") {
			t.Errorf("go.mod replaces %d modules, which `go install PKG@VERSION` refuses, but the README offers it:\n%s", len(replaces), sentence)
		}
	}
	if strings.Contains(text, "no `replace`") {
		t.Errorf("the README says go.mod has no `replace`; it has %d: %v", len(replaces), replaces)
	}
}
