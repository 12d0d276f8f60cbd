package evalengine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// internalOnly are the exported names of evalengine's internal packages
// that the root deliberately does not re-export: helpers the packages
// share among themselves, and hooks for the root's own tests
// (export_test.go). Everything else an internal package exports is part
// of the root API.
var internalOnly = map[string][]string{
	"evalcore": {
		// Errors and value helpers every package shares.
		"AdapterTag", "Bound", "KeysDetail", "LimitErr", "NewErr", "ReasonErr",
		"Fraction", "JSONInt", "KeySet", "PlainJSON", "PlainSize", "PruneValue", "ToGeneric", "UnknownKeys",
		// Set decoding, for the Google import.
		"CheckSet", "DecodeSet", "SetFromObject",
		// Result and criteria internals, for the renderers and the judge.
		"CanonicalResult", "WriteCanonicalResult", "CheckComparison", "CheckResult", "ExcerptString", "ExpectedResponse", "MetaFirstMismatch",
		"MetaOrEmpty", "NotEvaluatedCases", "SeriesOfResult", "StreamResult", "UsageOf", "ValidateMetrics", "ZFor",
		// The root's tests (export_test.go).
		"EncodeSample", "ResultSize", "ScanDecodersAgree", "ScanTypesMirror", "SpliceSamples", "TrajectoryKey", "TrajectoriesEqual",
	},
	"llm":       {"JudgeConfigKeys"},
	"googleadk": {"IsScenarioCase"},
}

// TestAPI_RootReExportsTheInternalPackages keeps the root the one API of
// evalengine: a name exported by an internal package is either
// re-exported by the root (api_*.go) or listed in internalOnly, so a
// new type, constant or function cannot silently stay out of reach of
// callers, and the list cannot go stale.
func TestAPI_RootReExportsTheInternalPackages(t *testing.T) {
	root := exportedNames(t, ".")
	dirs, err := os.ReadDir("internal")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		listed := map[string]bool{}
		for _, n := range internalOnly[d.Name()] {
			listed[n] = true
		}
		seen[d.Name()] = true
		names := exportedNames(t, filepath.Join("internal", d.Name()))
		for _, n := range sortedKeys(names) {
			switch {
			case root[n] && listed[n]:
				t.Errorf("internal/%s.%s is re-exported by the root and also listed in internalOnly", d.Name(), n)
			case !root[n] && !listed[n]:
				t.Errorf("internal/%s.%s is exported but the root does not re-export it: add it to api_%s.go, or to internalOnly if only evalengine's packages use it", d.Name(), n, d.Name())
			}
		}
		for _, n := range internalOnly[d.Name()] {
			if !names[n] {
				t.Errorf("internalOnly lists internal/%s.%s, which does not exist", d.Name(), n)
			}
		}
	}
	for p := range internalOnly {
		if !seen[p] {
			t.Errorf("internalOnly lists package %s, which does not exist", p)
		}
	}
}

// exportedNames are the exported package-level names declared in dir's
// non-test Go files (methods and fields are reached through the types).
func exportedNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}
