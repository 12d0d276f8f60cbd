package internal_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const module = "github.com/fadcedab/adk"

// externals are the outside modules a doc.go may name in an import rule.
var externals = map[string]string{
	"Badger": "github.com/dgraph-io/badger",
	"nats":   "github.com/nats-io/nats.go",
	"Raft":   "github.com/hashicorp/raft",
	"gRPC":   "google.golang.org/grpc",
	// capnslog takes over the standard log package in its init.
	"capnslog": "github.com/coreos/pkg/capnslog",
}

type goPkg struct {
	path    string // module-relative
	dir     string
	imports []string
	deps    []string
}

// TestLayering reads every package's doc.go and checks its import rules
// against go list, so a layering claim cannot go stale silently. Two
// sentence forms are rules (anything else in a doc comment is prose):
//
//	It must not import A, B or C.     (no transitive dependency on them)
//	It imports only A, B and C.       (direct imports: those and the standard library)
//
// An item is a module-relative package path (it covers the packages under
// it too, except those the same doc names by their longer path), one of
// the externals, "the standard library" (imports only),
// "any adk package outside internal" or "any adk package but A and B". An
// item naming no package of the module is a stale claim and fails.
func TestLayering(t *testing.T) {
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-deps=false", "-f",
		"{{.ImportPath}}\t{{.Dir}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]*goPkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			t.Fatalf("go list line %q", sc.Text())
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		pkgs[rel] = &goPkg{path: rel, dir: f[1], imports: strings.Fields(f[2]), deps: strings.Fields(f[3])}
	}
	rules := 0
	for _, p := range sortedPkgs(pkgs) {
		raw := docComment(t, filepath.Join(p.dir, "doc.go"))
		doc := parenRe.ReplaceAllString(raw, "")
		if doc == "" {
			continue
		}
		for _, m := range mustNotRe.FindAllStringSubmatch(doc, -1) {
			rules++
			forbidden := resolve(t, p, m[1], pkgs, false)
			deps := p.deps
			if strings.HasPrefix(m[1], "any adk package but ") {
				// What the allowed packages bring along is theirs to answer for.
				deps = p.imports
			}
			for _, d := range deps {
				if owner := forbidden(d); owner != "" && !named(raw, owner, d) {
					t.Errorf("%s/doc.go says it must not import %s, but it depends on %s", p.path, owner, d)
				}
			}
		}
		for _, m := range onlyRe.FindAllStringSubmatch(doc, -1) {
			rules++
			allowed := resolve(t, p, m[1], pkgs, true)
			for _, d := range p.imports {
				if allowed(d) == "" && !stdlib(d) && !strings.HasPrefix(d, module+"/"+p.path+"/") {
					t.Errorf("%s/doc.go says it imports only %s, but it imports %s", p.path, m[1], d)
				}
			}
		}
	}
	if rules < 20 {
		t.Fatalf("found only %d import rules in doc.go files: did the sentence form change?", rules)
	}
}

var (
	mustNotRe = regexp.MustCompile(`must not import ([^.;:]+)`)
	onlyRe    = regexp.MustCompile(`imports only ([^.;:]+)`)
	parenRe   = regexp.MustCompile(`\([^)]*\)`)
	splitRe   = regexp.MustCompile(`\s*,\s*|\s+or\s+|\s+and\s+`)
)

// named reports whether the doc names a package below the forbidden item
// that dep belongs to: "must not import coordinator" in a doc that names
// coordinator/api forbids the coordinator but not its wire package.
func named(doc, item, dep string) bool {
	rel, ok := strings.CutPrefix(dep, module+"/")
	if !ok {
		return false
	}
	for _, w := range strings.FieldsFunc(doc, func(r rune) bool { return r == ' ' || r == ',' || r == ';' || r == ':' || r == '(' || r == ')' }) {
		w = strings.TrimRight(w, ".")
		if len(w) > len(item) && under(w, item) && under(rel, w) {
			return true
		}
	}
	return false
}

// resolve turns a rule's item list into a matcher returning the item an
// import path falls under, or "".
func resolve(t *testing.T, p *goPkg, list string, pkgs map[string]*goPkg, only bool) func(string) string {
	t.Helper()
	list = strings.TrimSpace(parenRe.ReplaceAllString(list, ""))
	var ms []func(string) string
	if rest, ok := strings.CutPrefix(list, "any adk package but "); ok {
		var keep []string
		for _, it := range splitRe.Split(rest, -1) {
			keep = append(keep, checkPath(t, p, it, pkgs))
		}
		ms = append(ms, func(imp string) string {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if !ok || under(rel, p.path) {
				return ""
			}
			for _, k := range keep {
				if under(rel, k) {
					return ""
				}
			}
			return "any adk package but " + rest
		})
	} else if list == "any adk package outside internal" {
		ms = append(ms, func(imp string) string {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if ok && !under(rel, "internal") {
				return list
			}
			return ""
		})
	} else {
		for _, it := range splitRe.Split(list, -1) {
			it = strings.TrimSpace(it)
			switch {
			case it == "the standard library" && only:
				// Always allowed; naming it is for the reader.
			case externals[it] != "":
				prefix := externals[it]
				ms = append(ms, func(imp string) string {
					if imp == prefix || strings.HasPrefix(imp, prefix+"/") {
						return it
					}
					return ""
				})
			default:
				rel := checkPath(t, p, it, pkgs)
				ms = append(ms, func(imp string) string {
					if r, ok := strings.CutPrefix(imp, module+"/"); ok && under(r, rel) {
						return rel
					}
					return ""
				})
			}
		}
	}
	return func(imp string) string {
		for _, m := range ms {
			if s := m(imp); s != "" {
				return s
			}
		}
		return ""
	}
}

// planned are packages DESIGN.md lays out that do not exist yet; a rule may
// name them. Empty now that devapi exists.
var planned = map[string]bool{}

// checkPath fails the test when item names no package of the module.
func checkPath(t *testing.T, p *goPkg, item string, pkgs map[string]*goPkg) string {
	t.Helper()
	item = strings.TrimSpace(item)
	if planned[item] {
		return item
	}
	for rel := range pkgs {
		if under(rel, item) {
			return item
		}
	}
	t.Errorf("%s/doc.go: import rule names %q, which is no package of this module (stale, or not a path)", p.path, item)
	return item
}

func stdlib(imp string) bool { return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") }

func under(rel, prefix string) bool { return rel == prefix || strings.HasPrefix(rel, prefix+"/") }

// docComment returns the package comment of a doc.go as one line.
func docComment(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, ln := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(ln, "package ") {
			break
		}
		if s, ok := strings.CutPrefix(ln, "//"); ok {
			words = append(words, strings.Fields(strings.ReplaceAll(s, "`", ""))...)
		}
	}
	return strings.Join(words, " ")
}

func sortedPkgs(m map[string]*goPkg) []*goPkg {
	out := make([]*goPkg, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
