package devapi

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidJobID holds validJobID to the pattern it replaced.
func TestValidJobID(t *testing.T) {
	pattern := regexp.MustCompile(`^eval-[0-9a-f]{32}$`)
	hex := "0123456789abcdef0123456789abcdef"
	for _, id := range []string{
		"eval-" + hex, "eval-" + strings.ToUpper(hex), "eval-" + hex[:31], "eval-" + hex + "0",
		"eval-" + hex[:31] + "g", "eval-" + hex + "\n", "Eval-" + hex, "eval_" + hex, hex, "", "eval-",
		"xeval-" + hex[1:], "eval-" + hex[:16] + "é" + hex[18:], "eval-" + hex[:31] + "/",
	} {
		if got, want := validJobID(id), pattern.MatchString(id); got != want {
			t.Errorf("validJobID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}

// TestValidCaseIndex holds validCaseIndex to the pattern it replaced.
func TestValidCaseIndex(t *testing.T) {
	pattern := regexp.MustCompile(`^(0|[1-9][0-9]{0,8})$`)
	for _, v := range []string{
		"0", "1", "9", "10", "123456789", "1234567890", "00", "01", "-1", "+1", "", " 1", "1 ", "1\n",
		"999999999", "12a", "٣", "1e3",
	} {
		if got, want := validCaseIndex(v), pattern.MatchString(v); got != want {
			t.Errorf("validCaseIndex(%q) = %v, the pattern says %v", v, got, want)
		}
	}
}
