package coded

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

type colon struct{}

func (colon) Prefix() string       { return "a: " }
func (colon) DetailInParens() bool { return false }

type parens struct{}

func (parens) Prefix() string       { return "b: " }
func (parens) DetailInParens() bool { return true }

func TestError_MessageLayouts(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&Error[colon]{Code: "c"}, "a: c"},
		{&Error[colon]{Code: "c", Detail: "d"}, "a: c: d"},
		{&Error[colon]{Code: "c", Reason: "r", Detail: "d"}, "a: c: r: d"},
		{&Error[parens]{Code: "c", Detail: "d"}, "b: c (d)"},
		{&Error[parens]{Code: "c", Reason: "r", Detail: "d", Err: errors.New("secret")}, "b: c: r (d)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestError_IsMatchesCodeAndReasonWithinOneDomain(t *testing.T) {
	cause := errors.New("cause")
	err := fmt.Errorf("ctx: %w", &Error[parens]{Code: "c", Reason: "r", Detail: "d", Err: cause})
	if !errors.Is(err, &Error[parens]{Code: "c"}) || !errors.Is(err, &Error[parens]{Code: "c", Reason: "r"}) {
		t.Fatal("code (and reason) should match whatever the detail")
	}
	if errors.Is(err, &Error[parens]{Code: "c", Reason: "x"}) || errors.Is(err, &Error[parens]{Code: "x"}) {
		t.Fatal("another reason or code must not match")
	}
	if errors.Is(err, &Error[colon]{Code: "c"}) {
		t.Fatal("another domain's error must not match")
	}
	var other *Error[colon]
	if errors.As(err, &other) {
		t.Fatal("errors.As must not cross domains")
	}
	if !errors.Is(err, cause) {
		t.Fatal("the cause should unwrap")
	}
}

type withFields struct{ N *int }

func (withFields) Prefix() string       { return "" }
func (withFields) DetailInParens() bool { return false }

// TestError_FieldsAreNeitherPrintedNorMatched: a domain's own fields ride
// along for errors.As readers, but the message and errors.Is see only code,
// reason and detail, so a bare sentinel matches an error that carries them.
func TestError_FieldsAreNeitherPrintedNorMatched(t *testing.T) {
	n := 7
	err := fmt.Errorf("ctx: %w", &Error[withFields]{Code: "replay_gap", Detail: "d", Fields: withFields{N: &n}})
	if got := err.Error(); got != "ctx: replay_gap: d" {
		t.Fatalf("Error() = %q", got)
	}
	if !errors.Is(err, &Error[withFields]{Code: "replay_gap"}) {
		t.Fatal("a bare sentinel should match whatever the fields")
	}
	var e *Error[withFields]
	if !errors.As(err, &e) || e.Fields.N == nil || *e.Fields.N != 7 {
		t.Fatal("errors.As should hand back the fields")
	}
}
