package coordinator

import (
	"strings"
	"testing"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
)

// TestValidNotEvaluated: a submit's not_evaluated cases are bounded, each
// a non-empty id not in the set and not listed twice, each reason a
// lower-case token; a bad entry is a typed error naming it.
func TestValidNotEvaluated(t *testing.T) {
	set := &evalengine.Set{Cases: []evalengine.Case{{ID: "a"}, {ID: "b"}}}
	ok := []evalrecord.NotEvaluated{{CaseID: "s1", Reason: evalengine.NotEvaluatedUserSimulator}, {CaseID: "s2", Reason: "x_1"}}
	if err := validNotEvaluated(ok, set); err != nil {
		t.Fatal(err)
	}
	if err := validNotEvaluated(nil, set); err != nil {
		t.Fatal(err)
	}
	big := []evalrecord.NotEvaluated{{CaseID: strings.Repeat("x", api.MaxNotEvaluatedBytes), Reason: "r"}}
	for name, c := range map[string]struct {
		ne         []evalrecord.NotEvaluated
		code, want string
	}{
		"empty id":      {[]evalrecord.NotEvaluated{{Reason: "r"}}, api.CodeInvalidRequest, "not_evaluated[0].case_id: empty"},
		"a set case":    {[]evalrecord.NotEvaluated{{CaseID: "b", Reason: "r"}}, api.CodeInvalidRequest, `not_evaluated[0].case_id: "b"`},
		"listed twice":  {[]evalrecord.NotEvaluated{{CaseID: "s", Reason: "r"}, {CaseID: "s", Reason: "r"}}, api.CodeInvalidRequest, `not_evaluated[1].case_id: "s"`},
		"bad reason":    {[]evalrecord.NotEvaluated{{CaseID: "s", Reason: "Not Configured"}}, api.CodeInvalidRequest, "not_evaluated[0].reason"},
		"empty reason":  {[]evalrecord.NotEvaluated{{CaseID: "s"}}, api.CodeInvalidRequest, "not_evaluated[0].reason"},
		"over the size": {big, api.CodeRequestLimit, "not_evaluated: over"},
	} {
		err := validNotEvaluated(c.ne, set)
		if e := api.AsError(err); err == nil || e.Code != c.code || !strings.Contains(e.Error(), c.want) {
			t.Errorf("%s: %v, want %s naming %q", name, err, c.code, c.want)
		}
	}
}
