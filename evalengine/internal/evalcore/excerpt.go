package evalcore

import (
	"strconv"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/internal/secrets"
)

// MaxExcerptRunes bounds an expected/actual excerpt.
const MaxExcerptRunes = 200

// Excerpt renders a response or argument value for a report: a string as
// itself, anything else as canonical JSON with secret-named keys pruned,
// cut to MaxExcerptRunes runes (the cut is marked with its full length).
func Excerpt(v any) string {
	switch x := v.(type) {
	case string:
		return ExcerptString(strconv.Quote(x))
	case nil:
		return "null"
	}
	b, err := canonjson.Marshal(secrets.Prune(v))
	if err != nil {
		return "(unrenderable)"
	}
	return ExcerptString(string(b))
}

func ExcerptString(s string) string {
	if utf8.RuneCountInString(s) <= MaxExcerptRunes {
		return s
	}
	n, i := 0, 0
	for i = range s {
		if n == MaxExcerptRunes {
			break
		}
		n++
	}
	return s[:i] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
