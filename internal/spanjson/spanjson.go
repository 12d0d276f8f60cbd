// Package spanjson writes observability spans as encoding/json writes
// them, without reflection: the signal publisher (bus) and the OTLP
// receiver encode every span through it. Its callers hold it
// byte-identical to json.Marshal with tests and fuzz targets.
package spanjson

import (
	"strconv"
	"unicode/utf8"

	"github.com/fadcedab/adk/observability"
)

// AppendHead appends s's fields in json.Marshal's order, with its
// omitempty rules, from the opening brace through `,"attributes":`; the
// caller appends the attributes and the closing brace.
func AppendHead(b []byte, s *observability.SpanSignal) []byte {
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(s.Schema), 10)
	b = append(b, `,"signal":`...)
	b = AppendString(b, s.Signal)
	b = append(b, `,"phase":`...)
	b = AppendString(b, s.Phase)
	b = append(b, `,"name":`...)
	b = AppendString(b, s.Name)
	b = append(b, `,"kind":`...)
	b = AppendString(b, s.Kind)
	b = append(b, `,"trace_id":`...)
	b = AppendString(b, s.TraceID)
	b = append(b, `,"span_id":`...)
	b = AppendString(b, s.SpanID)
	if s.ParentSpanID != "" {
		b = append(b, `,"parent_span_id":`...)
		b = AppendString(b, s.ParentSpanID)
	}
	b = append(b, `,"trace_flags":`...)
	b = strconv.AppendInt(b, int64(s.TraceFlags), 10)
	if s.TraceState != "" {
		b = append(b, `,"tracestate":`...)
		b = AppendString(b, s.TraceState)
	}
	b = append(b, `,"start_time_unix_nano":`...)
	b = strconv.AppendInt(b, s.StartTimeUnixNano, 10)
	if s.EndTimeUnixNano != 0 {
		b = append(b, `,"end_time_unix_nano":`...)
		b = strconv.AppendInt(b, s.EndTimeUnixNano, 10)
	}
	if s.DurationNano != nil {
		b = append(b, `,"duration_nano":`...)
		b = strconv.AppendInt(b, *s.DurationNano, 10)
	}
	if s.Status != "" {
		b = append(b, `,"status":`...)
		b = AppendString(b, s.Status)
	}
	b = append(b, `,"attributes":`...)
	return b
}

const hexDigits = "0123456789abcdef"

// AppendString quotes s as encoding/json does by default: <, > and &
// are escaped (HTML-safe), as are U+2028, U+2029 and invalid UTF-8.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
