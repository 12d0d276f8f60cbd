package tracestore

import (
	"encoding/json"
	"testing"
)

// FuzzProject feeds untrusted records to the projection: it must never
// panic, and whatever it accepts must be valid JSON whose event holds no
// content key (reject policy).
func FuzzProject(f *testing.F) {
	f.Add(KindObservability, envelope("r", "t", nil))
	f.Add(KindObservability, spanJSON("t", 5))
	f.Add(KindWorkflowLifecycle, workflowJSON("w", "i", nil))
	f.Add(KindObservability, []byte(`{"schema_version":2,"signal":"span","attributes":{"PromptText":"x"}}`))
	f.Add(KindObservability, []byte(`[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]`))
	f.Add(KindWorkflowLifecycle, []byte(`{"schema_version":1,"type":"x","sequence":-1}`))
	o, err := Options{}.resolve()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, kind string, data []byte) {
		pj, err := project(kind, data, o)
		if err != nil {
			if ErrorCode(err) == "" {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		js := pj.event.appendJSON(nil)
		var back map[string]any
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatalf("stored event is not JSON: %v", err)
		}
		var walk func(v any, top bool)
		walk = func(v any, top bool) {
			switch x := v.(type) {
			case map[string]any:
				for k, c := range x {
					if isContentKey(k) && !(top && k == "content_captured") && !usageInts[k] && !attrText[k] {
						t.Fatalf("content key %q stored", k)
					}
					walk(c, false)
				}
			case []any:
				for _, c := range x {
					walk(c, false)
				}
			}
		}
		walk(back, true)
	})
}

// FuzzProjectMatchesReference holds the tape projection to the map-based
// reference (projection_ref_test.go): the same verdict, the same stored
// bytes when accepted, and an error code the reference can give (its map
// iteration order makes the code of a record with several faults vary, so
// the reference runs several times).
func FuzzProjectMatchesReference(f *testing.F) {
	for _, s := range projectionSeeds() {
		f.Add(s.kind, s.data, s.prune)
	}
	f.Fuzz(func(t *testing.T, kind string, data []byte, prune bool) {
		checkAgainstReference(t, kind, data, prune)
	})
}
