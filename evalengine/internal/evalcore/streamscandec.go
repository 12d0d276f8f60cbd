package evalcore

import (
	"errors"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// lineDecoder checks a stream line against the stream's limits and
// decodes it into the scan types in one pass: a jsonlimit.Scanner does
// what jsonlimit.Check does as the decoder reads the line, and the
// decoder does what encoding/json with DisallowUnknownFields and
// UseNumber does for those types, without reflection: a key matches a
// field by its exact name, else by encoding/json's case folding; an
// unknown key, a value of the wrong JSON type, an integer that is not
// one, or a number out of float64's range refuses the line; null leaves
// a scalar or struct as it is and makes a list, a pointer or an
// interface nil; a repeated (folded) key decodes again into what the
// first one left, as encoding/json does. What the types do not read
// (metadata, turn inputs and outputs, events, step args) is checked and
// not built. FuzzScanLineDecoder holds it to jsonlimit.Check's errors
// and encoding/json's verdicts and values on any input. A lineDecoder is
// reused line after line (its buffers are kept).
type lineDecoder struct {
	s    jsonlimit.Scanner
	fold []byte
}

// errScanLine is a line the scan decoder refuses (encoding/json would
// return an error for it).
var errScanLine = errors.New("line refused")

// str is the string value next, unescaped.
func (d *lineDecoder) str() (string, error) {
	b, err := d.s.StringValue()
	return string(b), err
}

// object calls field with the index in names of every key of the object
// next (its value next), by exact name, else folded (foldedNames are
// names folded); a key matching no name refuses the line. null is no
// object (a no-op, as for a struct).
func (d *lineDecoder) object(names, foldedNames []string, field func(i int) error) error {
	switch d.s.NextByte() {
	case 'n':
		return d.s.Skip()
	case '{':
	default:
		return errScanLine
	}
	if err := d.s.Object(); err != nil {
		return err
	}
	// The writer puts the keys in the fields' order: the field after the
	// last one is tried first.
	for next := 0; ; {
		key, more, err := d.s.Key()
		if err != nil || !more {
			return err
		}
		i := next
		if i >= len(names) || string(key) != names[i] {
			if i = fieldIndex(key, names, foldedNames, &d.fold); i < 0 {
				return errScanLine
			}
		}
		next = i + 1
		if err := field(i); err != nil {
			return err
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

// list decodes the array next element by element into a slice of
// length n (elem decodes element i, grow makes it exist), as
// encoding/json does into a slice: existing elements are decoded into,
// the slice ends at the array's length, [] is an empty slice and null a
// nil one (set(-1)).
func (d *lineDecoder) list(truncate func(n int), elem func(i int) error) error {
	switch d.s.NextByte() {
	case 'n':
		if err := d.s.Skip(); err != nil {
			return err
		}
		truncate(-1)
		return nil
	case '[':
	default:
		return errScanLine
	}
	if err := d.s.Array(); err != nil {
		return err
	}
	for n := 0; ; n++ {
		more, err := d.s.Elem()
		if err != nil {
			return err
		}
		if !more {
			truncate(n)
			return nil
		}
		if err := elem(n); err != nil {
			return err
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
	switch d.s.NextByte() {
	case 'n':
		return d.s.Skip()
	case '"':
		s, err := d.str()
		*dst = s
		return err
	}
	return errScanLine
}

func (d *lineDecoder) boolField(dst *bool) error {
	switch d.s.NextByte() {
	case 'n':
		return d.s.Skip()
	case 't':
		*dst = true
	case 'f':
		*dst = false
	default:
		return errScanLine
	}
	return d.s.Skip()
}

// number is the number next, or false for null (skipped).
func (d *lineDecoder) number() ([]byte, bool, error) {
	switch c := d.s.NextByte(); {
	case c == 'n':
		return nil, false, d.s.Skip()
	case c != '-' && (c < '0' || c > '9'):
		return nil, false, errScanLine
	}
	lit, err := d.s.NumberValue()
	return lit, err == nil, err
}

func (d *lineDecoder) intField(dst *int64) error {
	lit, ok, err := d.number()
	if !ok {
		return err
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
	lit, ok, err := d.number()
	if !ok {
		return err
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return errScanLine
	}
	*dst = f
	return nil
}

// standIn is a jsonObject, jsonArray or jsonString: the JSON type open
// or null, checked and not built.
func (d *lineDecoder) standIn(set *bool, open byte) error {
	switch d.s.NextByte() {
	case 'n':
		*set = false
	case open:
		*set = true
	default:
		return errScanLine
	}
	return d.s.Skip()
}

// anyField is an `any` field: the generic value (encoding/json with
// UseNumber and jsonlimit build the same ones).
func (d *lineDecoder) anyField(dst *any) error {
	v, err := d.s.Value()
	*dst = v
	return err
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

// decode checks a sample or case line against lim and decodes it into
// v (*scanSampleLine or *scanCaseLine): what jsonlimit.Unmarshal does,
// in one pass and without reflection. Its error is jsonlimit.Check's for
// a line Check refuses, else errScanLine for one encoding/json refuses.
func (d *lineDecoder) decode(line []byte, lim jsonlimit.Limits, v any) error {
	var err error
	switch v := v.(type) {
	case *scanSampleLine:
		err = decodeLineObject(d, line, lim, sampleLineNames, sampleLineFolded, &v.Type, &v.CaseIndex, &v.Sample, (*lineDecoder).sample)
	case *scanCaseLine:
		err = decodeLineObject(d, line, lim, caseLineNames, caseLineFolded, &v.Type, &v.CaseIndex, &v.Case, (*lineDecoder).caseResult)
	default:
		return errScanLine
	}
	if err == errScanLine {
		// The types refused the line where they stopped reading it; a
		// limit or syntax error after that point is the line's error,
		// as it was when Check ran first. Only refused lines pay for it.
		if cerr := jsonlimit.Check(line, lim); cerr != nil {
			return cerr
		}
	}
	return err
}

// decodeLineObject decodes a stream line's object: its type, its case
// index and its one body field (names[2]), null or decoded by body into
// the value it points at (allocated when nil, as encoding/json does).
func decodeLineObject[T any](d *lineDecoder, line []byte, lim jsonlimit.Limits, names, folded []string, typ *string, caseIndex *int, dst **T, body func(*lineDecoder, *T) error) error {
	if err := d.s.Reset(line, lim); err != nil {
		return err
	}
	if err := d.object(names, folded, func(i int) error {
		switch i {
		case 0:
			return d.stringField(typ)
		case 1:
			return d.intFieldInt(caseIndex)
		}
		if d.s.NextByte() == 'n' {
			*dst = nil
			return d.s.Skip()
		}
		if *dst == nil {
			*dst = new(T)
		}
		return body(d, *dst)
	}); err != nil {
		return err
	}
	return d.s.End()
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
			return d.s.Skip()
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
			return d.s.Skip()
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
			switch d.s.NextByte() {
			case 'n':
				s.CallID = nil
				return d.s.Skip()
			case '"':
			default:
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
