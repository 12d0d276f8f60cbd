package evalcore

import (
	"errors"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// lineDecoder decodes a stream line that jsonlimit.Check has accepted
// (valid JSON within the limits, no repeated key, valid UTF-8) into the
// scan types, doing what encoding/json with DisallowUnknownFields and
// UseNumber does for them, in one pass and without reflection: a key
// matches a field by its exact name, else by encoding/json's case folding;
// an unknown key, a value of the wrong JSON type, an integer that is not
// one, or a number out of float64's range refuses the line; null leaves a
// scalar or struct as it is and makes a list, a pointer or an interface
// nil; a repeated (folded) key decodes again into what the first one
// left, as encoding/json does. FuzzScanLineDecoder holds it to
// encoding/json's verdicts and values on any input.
type lineDecoder struct {
	data    []byte
	pos     int
	scratch []byte
	fold    []byte
}

// errScanLine is a line the scan decoder refuses (encoding/json would
// return an error for it).
var errScanLine = errors.New("line refused")

func (d *lineDecoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek is the first byte of the next value (after white space).
func (d *lineDecoder) peek() byte {
	d.ws()
	if d.pos >= len(d.data) {
		return 0
	}
	return d.data[d.pos]
}

// rawString returns the body of the string at d.pos and whether it has
// escapes, and moves past it.
func (d *lineDecoder) rawString() ([]byte, bool) {
	start := d.pos + 1
	escaped := false
	for i := start; i < len(d.data); i++ {
		switch d.data[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			d.pos = i + 1
			return d.data[start:i], escaped
		}
	}
	d.pos = len(d.data)
	return d.data[start:], escaped
}

// str is the string at d.pos, unescaped.
func (d *lineDecoder) str() (string, error) {
	raw, escaped := d.rawString()
	if !escaped {
		return string(raw), nil
	}
	buf, fault, _ := jsonlimit.Unescape(d.scratch[:0], raw, len(raw))
	d.scratch = buf[:0]
	if fault != jsonlimit.UnescapeOK {
		return "", errScanLine
	}
	return string(buf), nil
}

// skip moves past the value at d.pos.
func (d *lineDecoder) skip() {
	switch d.peek() {
	case '"':
		d.rawString()
	case '{', '[':
		depth := 0
		for d.pos < len(d.data) {
			switch d.data[d.pos] {
			case '"':
				d.rawString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					d.pos++
					return
				}
			}
			d.pos++
		}
	default:
		for d.pos < len(d.data) {
			switch d.data[d.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			d.pos++
		}
	}
}

// literal is the number or literal at d.pos.
func (d *lineDecoder) literal() []byte {
	start := d.pos
	d.skip()
	return d.data[start:d.pos]
}

// isNull moves past a null and reports it.
func (d *lineDecoder) isNull() bool {
	if d.peek() == 'n' {
		d.pos += len("null")
		return true
	}
	return false
}

// object calls field with the index in names of every key of the object
// at d.pos (its value at d.pos), by exact name, else folded (foldedNames
// are names folded); a key matching no name refuses the line. null is
// no object (a no-op, as for a struct).
func (d *lineDecoder) object(names, foldedNames []string, field func(i int) error) error {
	switch d.peek() {
	case 'n':
		d.pos += len("null")
		return nil
	case '{':
	default:
		return errScanLine
	}
	d.pos++
	if d.peek() == '}' {
		d.pos++
		return nil
	}
	for {
		d.ws()
		key, escaped := d.rawString()
		if escaped {
			buf, fault, _ := jsonlimit.Unescape(d.scratch[:0], key, len(key))
			if fault != jsonlimit.UnescapeOK {
				return errScanLine
			}
			key, d.scratch = buf, buf[:0]
		}
		i := fieldIndex(key, names, foldedNames, &d.fold)
		if i < 0 {
			return errScanLine
		}
		d.ws()
		d.pos++ // ':'
		if err := field(i); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return nil
		default:
			return errScanLine
		}
	}
}

// fieldIndex is the index of key's field, or -1.
func fieldIndex(key []byte, names, foldedNames []string, buf *[]byte) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	*buf = appendFoldedName((*buf)[:0], key)
	for i, n := range foldedNames {
		if string(*buf) == n {
			return i
		}
	}
	return -1
}

// appendFoldedName is encoding/json's key folding: ASCII upper-cased, any
// other rune the smallest of its simple fold orbit.
func appendFoldedName(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return out
}

func foldedNames(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(appendFoldedName(nil, []byte(n)))
	}
	return out
}

// list decodes the array at d.pos element by element into a slice of
// length n (elem decodes element i, grow makes it exist), as
// encoding/json does into a slice: existing elements are decoded into,
// the slice ends at the array's length, [] is an empty slice and null a
// nil one (set(-1)).
func (d *lineDecoder) list(truncate func(n int), elem func(i int) error) error {
	switch d.peek() {
	case 'n':
		d.pos += len("null")
		truncate(-1)
		return nil
	case '[':
	default:
		return errScanLine
	}
	d.pos++
	n := 0
	if d.peek() == ']' {
		d.pos++
		truncate(0)
		return nil
	}
	for {
		if err := elem(n); err != nil {
			return err
		}
		n++
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			truncate(n)
			return nil
		default:
			return errScanLine
		}
	}
}

// sliceOf is d.list for a slice of T decoded by dec.
func sliceOf[T any](d *lineDecoder, s *[]T, dec func(*T) error) error {
	return d.list(func(n int) {
		switch {
		case n < 0:
			*s = nil
		case n == 0:
			*s = []T{}
		default:
			*s = (*s)[:n]
		}
	}, func(i int) error {
		switch {
		case i < len(*s):
		case i < cap(*s):
			// reflect's SetLen: what an earlier (folded) key left
			// there is decoded into, not zeroed.
			*s = (*s)[:i+1]
		default:
			var zero T
			*s = append(*s, zero)
		}
		return dec(&(*s)[i])
	})
}

func (d *lineDecoder) stringField(dst *string) error {
	switch d.peek() {
	case 'n':
		d.pos += len("null")
		return nil
	case '"':
		s, err := d.str()
		*dst = s
		return err
	}
	return errScanLine
}

func (d *lineDecoder) boolField(dst *bool) error {
	switch d.peek() {
	case 'n':
		d.pos += len("null")
	case 't':
		d.pos += len("true")
		*dst = true
	case 'f':
		d.pos += len("false")
		*dst = false
	default:
		return errScanLine
	}
	return nil
}

func (d *lineDecoder) number() ([]byte, bool) {
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	return d.literal(), true
}

func (d *lineDecoder) intField(dst *int64) error {
	if d.isNull() {
		return nil
	}
	lit, ok := d.number()
	if !ok {
		return errScanLine
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		return errScanLine
	}
	*dst = n
	return nil
}

func (d *lineDecoder) intFieldInt(dst *int) error {
	v := int64(*dst)
	if err := d.intField(&v); err != nil {
		return err
	}
	if int64(int(v)) != v {
		return errScanLine
	}
	*dst = int(v)
	return nil
}

func (d *lineDecoder) floatField(dst *float64) error {
	if d.isNull() {
		return nil
	}
	lit, ok := d.number()
	if !ok {
		return errScanLine
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return errScanLine
	}
	*dst = f
	return nil
}

// standIn is a jsonObject, jsonArray or jsonString: the JSON type open
// or null.
func (d *lineDecoder) standIn(set *bool, open byte) error {
	switch d.peek() {
	case 'n':
		d.pos += len("null")
		*set = false
		return nil
	case open:
		d.skip()
		*set = true
		return nil
	}
	return errScanLine
}

// anyField is an `any` field: the generic value (encoding/json with
// UseNumber and jsonlimit.Decode build the same ones from a checked
// line).
func (d *lineDecoder) anyField(dst *any) error {
	d.ws()
	start := d.pos
	d.skip()
	v, err := jsonlimit.Decode(d.data[start:d.pos], jsonlimit.OwnDocumentLimits())
	if err != nil {
		return errScanLine
	}
	*dst = v
	return nil
}

var (
	sampleLineNames = []string{"type", "case_index", "sample"}
	caseLineNames   = []string{"type", "case_index", "case"}
	sampleNames     = []string{"case_id", "sample_id", "sample_index", "status", "passed", "duration_ms", "turns", "trajectory", "criteria", "metadata", "error", "trace_id"}
	turnNames       = []string{"turn_id", "input", "expected", "actual", "passed", "metrics", "events", "trajectory", "metadata", "adapter_metadata", "run_id", "trace_id"}
	stepNames       = []string{"turn_id", "kind", "tool", "call_id", "args", "result"}
	metricNames     = []string{"metric_id", "kind", "scope", "score", "threshold", "passed", "status", "metadata"}
	caseNames       = []string{"case_id", "status", "passed", "duration_ms", "trajectory", "metadata", "criteria", "sample_count", "successful_sample_count", "passed_sample_count", "error_sample_count", "sample_pass_rate", "sample_pass_rate_threshold", "min_successful_samples", "sample_statistics", "samples"}
	statsNames      = []string{"count", "mean", "minimum", "maximum", "standard_deviation"}

	sampleLineFolded = foldedNames(sampleLineNames...)
	caseLineFolded   = foldedNames(caseLineNames...)
	sampleFolded     = foldedNames(sampleNames...)
	turnFolded       = foldedNames(turnNames...)
	stepFolded       = foldedNames(stepNames...)
	metricFolded     = foldedNames(metricNames...)
	caseFolded       = foldedNames(caseNames...)
	statsFolded      = foldedNames(statsNames...)
)

// decodeScanSampleLine decodes a checked sample line into s as
// encoding/json would (see lineDecoder).
func decodeScanSampleLine(line []byte, s *scanSampleLine) error {
	return decodeLineObject(line, sampleLineNames, sampleLineFolded, &s.Type, &s.CaseIndex, &s.Sample, (*lineDecoder).sample)
}

// decodeScanCaseLineInto decodes a checked case line into c as
// encoding/json would.
func decodeScanCaseLineInto(line []byte, c *scanCaseLine) error {
	return decodeLineObject(line, caseLineNames, caseLineFolded, &c.Type, &c.CaseIndex, &c.Case, (*lineDecoder).caseResult)
}

// decodeLineObject decodes a stream line's object: its type, its case
// index and its one body field (names[2]), null or decoded by body into
// the value it points at (allocated when nil, as encoding/json does).
func decodeLineObject[T any](line []byte, names, folded []string, typ *string, caseIndex *int, dst **T, body func(*lineDecoder, *T) error) error {
	d := &lineDecoder{data: line}
	if err := d.object(names, folded, func(i int) error {
		switch i {
		case 0:
			return d.stringField(typ)
		case 1:
			return d.intFieldInt(caseIndex)
		}
		if d.isNull() {
			*dst = nil
			return nil
		}
		if *dst == nil {
			*dst = new(T)
		}
		return body(d, *dst)
	}); err != nil {
		return err
	}
	return d.end()
}

// decodeScanLine checks a sample or case line against lim and decodes it
// into v (*scanSampleLine or *scanCaseLine): what jsonlimit.Unmarshal
// does, in two passes instead of three and without reflection.
func decodeScanLine(line []byte, lim jsonlimit.Limits, v any) error {
	if err := jsonlimit.Check(line, lim); err != nil {
		return err
	}
	switch v := v.(type) {
	case *scanSampleLine:
		return decodeScanSampleLine(line, v)
	case *scanCaseLine:
		return decodeScanCaseLineInto(line, v)
	}
	return errScanLine
}

// end refuses anything but white space after the line's object.
func (d *lineDecoder) end() error {
	d.ws()
	if d.pos != len(d.data) {
		return errScanLine
	}
	return nil
}

func (d *lineDecoder) sample(s *scanSample) error {
	return d.object(sampleNames, sampleFolded, func(i int) error {
		switch i {
		case 0:
			return d.stringField(&s.CaseID)
		case 1:
			return d.stringField(&s.SampleID)
		case 2:
			return d.intFieldInt(&s.SampleIndex)
		case 3:
			return d.stringField(&s.Status)
		case 4:
			return d.boolField(&s.Passed)
		case 5:
			return d.intField(&s.DurationMS)
		case 6:
			return sliceOf(d, &s.Turns, d.turn)
		case 7:
			return sliceOf(d, &s.Trajectory, d.step)
		case 8:
			return sliceOf(d, &s.Criteria, d.metric)
		case 9:
			return d.standIn(&s.Metadata.set, '{')
		case 10:
			return d.stringField(&s.Error)
		default:
			return d.stringField(&s.TraceID)
		}
	})
}

func (d *lineDecoder) turn(t *scanTurn) error {
	return d.object(turnNames, turnFolded, func(i int) error {
		switch i {
		case 0:
			return d.stringField(&t.TurnID)
		case 1, 2, 3:
			d.skip()
			return nil
		case 4:
			return d.boolField(&t.Passed)
		case 5:
			return sliceOf(d, &t.Metrics, d.metric)
		case 6:
			return d.standIn(&t.Events.set, '[')
		case 7:
			return sliceOf(d, &t.Trajectory, d.step)
		case 8:
			return d.standIn(&t.Metadata.set, '{')
		case 9:
			return d.standIn(&t.AdapterMetadata.set, '{')
		case 10:
			return d.stringField(&t.RunID)
		default:
			return d.stringField(&t.TraceID)
		}
	})
}

func (d *lineDecoder) step(s *scanTrajectoryItem) error {
	return d.object(stepNames, stepFolded, func(i int) error {
		switch i {
		case 0:
			return d.stringField(&s.TurnID)
		case 1:
			return d.stringField(&s.Kind)
		case 2:
			return d.stringField(&s.Tool)
		case 3:
			return d.standIn(&s.CallID.set, '"')
		default:
			d.skip()
			return nil
		}
	})
}

func (d *lineDecoder) metric(m *scanMetric) error {
	return d.object(metricNames, metricFolded, func(i int) error {
		switch i {
		case 0:
			return d.stringField(&m.MetricID)
		case 1:
			return d.stringField(&m.Kind)
		case 2:
			return d.stringField(&m.Scope)
		case 3:
			return d.floatField(&m.Score)
		case 4:
			return d.floatField(&m.Threshold)
		case 5:
			return d.boolField(&m.Passed)
		case 6:
			return d.stringField(&m.Status)
		default:
			return d.standIn(&m.Metadata.set, '{')
		}
	})
}

func (d *lineDecoder) caseResult(c *scanCase) error {
	return d.object(caseNames, caseFolded, func(i int) error {
		switch i {
		case 0:
			return d.stringField(&c.CaseID)
		case 1:
			return d.stringField(&c.Status)
		case 2:
			return d.boolField(&c.Passed)
		case 3:
			return d.intField(&c.DurationMS)
		case 4:
			return sliceOf(d, &c.Trajectory, d.fullStep)
		case 5:
			return d.standIn(&c.Metadata.set, '{')
		case 6:
			return sliceOf(d, &c.Criteria, d.metric)
		case 7:
			return d.intFieldInt(&c.SampleCount)
		case 8:
			return d.intFieldInt(&c.SuccessfulSampleCount)
		case 9:
			return d.intFieldInt(&c.PassedSampleCount)
		case 10:
			return d.intFieldInt(&c.ErrorSampleCount)
		case 11:
			return d.floatField(&c.SamplePassRate)
		case 12:
			return d.floatField(&c.SamplePassRateThreshold)
		case 13:
			return d.intFieldInt(&c.MinSuccessfulSamples)
		case 14:
			st := &c.SampleStatistics
			return d.object(statsNames, statsFolded, func(i int) error {
				switch i {
				case 0:
					return d.intFieldInt(&st.Count)
				case 1:
					return d.floatField(&st.Mean)
				case 2:
					return d.floatField(&st.Minimum)
				case 3:
					return d.floatField(&st.Maximum)
				default:
					return d.floatField(&st.StandardDeviation)
				}
			})
		default:
			return d.standIn(&c.Samples.set, '[')
		}
	})
}

// fullStep is a TrajectoryItem built whole (a case line's trajectory,
// which a comparison side digests).
func (d *lineDecoder) fullStep(s *TrajectoryItem) error {
	return d.object(stepNames, stepFolded, func(i int) error {
		switch i {
		case 0:
			return d.stringField(&s.TurnID)
		case 1:
			return d.stringField(&s.Kind)
		case 2:
			return d.stringField(&s.Tool)
		case 3:
			if d.isNull() {
				s.CallID = nil
				return nil
			}
			if d.peek() != '"' {
				return errScanLine
			}
			v, err := d.str()
			if s.CallID == nil {
				s.CallID = new(string)
			}
			*s.CallID = v
			return err
		case 4:
			return d.anyField(&s.Args)
		default:
			return d.anyField(&s.Result)
		}
	})
}
