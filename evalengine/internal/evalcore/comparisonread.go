package evalcore

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// Bounds of ReadComparison: a comparison of any size is one JSON document
// (doc.go, 17.) with a row per baseline case; it is read a row at a time,
// each row bounded, never the document whole.
const (
	// MaxComparisonReadBytes bounds the document ReadComparison reads (a
	// 100,000-case comparison with 64-byte ids is about 20 MB).
	MaxComparisonReadBytes = 512 << 20
	// maxComparisonRowBytes bounds one metric or case row: a case id is
	// one JSON string (at most 1 MiB decoded, six times that escaped).
	maxComparisonRowBytes = 8 << 20
	// maxComparisonHeaderBytes bounds the fields outside the rows
	// together (ids, versions and numbers).
	maxComparisonHeaderBytes = 4 << 20
	// maxComparisonKeyBytes bounds a top-level key.
	maxComparisonKeyBytes = 1024
)

// The two row lists of a comparison document.
const (
	comparisonMetricRows = "metric_diffs"
	comparisonCaseRows   = "case_diffs"
)

// ReadComparison reads a comparison document of any size from r with
// DecodeComparison's checks, a row at a time: the top-level object is
// scanned key by key; each row of metric_diffs and case_diffs is cut out
// (at most 8 MiB) and decoded in one pass through a jsonlimit.Scanner
// under the default JSON limits (unknown fields, wrong types, duplicate
// keys refused as jsonlimit refuses them), checked against what its
// re-encoding would be (every field once, by its exact name, not null)
// and against the row before it (order, verdict, reason); the fields outside the rows are
// decoded together the same way, then the verdict is checked against
// every row's. Errors are invalid_eval_comparison with the jsonlimit code
// or the verification reason, and the detail names the field
// ($.case_diffs[12].regression). Memory is the comparison's rows and one
// row's bytes; the document is at most MaxComparisonReadBytes.
func ReadComparison(r io.Reader) (*Comparison, error) {
	cr := &comparisonReader{br: bufio.NewReaderSize(io.LimitReader(r, MaxComparisonReadBytes+1), streamBufferBytes)}
	c, err := cr.read()
	if err != nil {
		var je *jsonlimit.Error
		if errors.As(err, &je) {
			return nil, LimitErr(CodeInvalidComparison, err)
		}
		return nil, err
	}
	return c, nil
}

type comparisonReader struct {
	dec    lineDecoder // decodes every row, its buffers kept
	br     *bufio.Reader
	off    int // bytes read
	buf    []byte
	header []byte // `"key":value` pairs of the fields outside the rows
	c      Comparison
	rows   map[string]bool // row lists seen
	// regression is any row's regression.
	regression bool
}

var errComparisonEOF = errors.New("end of input")

func (cr *comparisonReader) syntax(path, reason string) error {
	return &jsonlimit.Error{Code: jsonlimit.CodeInvalidJSON, Path: path, Offset: cr.off, Reason: reason}
}

// next is the next byte, errComparisonEOF at the end.
func (cr *comparisonReader) next() (byte, error) {
	b, err := cr.br.ReadByte()
	if err == io.EOF {
		return 0, errComparisonEOF
	}
	if err != nil {
		return 0, &Error{Code: CodeInvalidComparison, Reason: "read_failed", Err: err}
	}
	cr.off++
	if cr.off > MaxComparisonReadBytes {
		return 0, &jsonlimit.Error{Code: jsonlimit.CodeTooLarge, Limit: MaxComparisonReadBytes, Path: "$"}
	}
	return b, nil
}

// token is the next byte that is not white space; at the end of input it
// is a syntax error at path.
func (cr *comparisonReader) token(path string) (byte, error) {
	for {
		b, err := cr.next()
		if err == errComparisonEOF {
			return 0, cr.syntax(path, "unexpected end of input")
		}
		if err != nil {
			return 0, err
		}
		switch b {
		case ' ', '\t', '\n', '\r':
		default:
			return b, nil
		}
	}
}

// value cuts out the JSON value that starts with first into cr.buf, at
// most max bytes, without judging it beyond its extent (the decoder that
// reads it does): a string to its closing quote, an object or array to
// its matching bracket (strings inside skipped), a number or literal to
// the next delimiter, which is left unread.
func (cr *comparisonReader) value(first byte, max int, path string) ([]byte, error) {
	buf := append(cr.buf[:0], first)
	defer func() { cr.buf = buf[:0] }()
	add := func(b byte) error {
		if len(buf) == max {
			return &jsonlimit.Error{Code: jsonlimit.CodeTooLarge, Limit: max, Path: path}
		}
		buf = append(buf, b)
		return nil
	}
	eof := func(err error) error {
		if err == errComparisonEOF {
			return cr.syntax(path, "unexpected end of input")
		}
		return err
	}
	depth, inString, escaped := 0, first == '"', false
	switch first {
	case '{', '[':
		depth = 1
	case '"':
	default:
		for {
			b, err := cr.next()
			if err == errComparisonEOF {
				return buf, nil
			}
			if err != nil {
				return nil, err
			}
			switch b {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				_ = cr.br.UnreadByte()
				cr.off--
				return buf, nil
			}
			if err := add(b); err != nil {
				return nil, err
			}
		}
	}
	for {
		b, err := cr.next()
		if err != nil {
			return nil, eof(err)
		}
		if err := add(b); err != nil {
			return nil, err
		}
		switch {
		case escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
			if !inString && depth == 0 {
				return buf, nil
			}
		case inString:
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
			if depth == 0 {
				return buf, nil
			}
		}
	}
}

func (cr *comparisonReader) read() (*Comparison, error) {
	b, err := cr.token("$")
	if err != nil {
		return nil, err
	}
	if b != '{' {
		return nil, cr.syntax("$", "expected an object")
	}
	cr.rows = map[string]bool{}
	keys := map[string]bool{}
	if b, err = cr.token("$"); err != nil {
		return nil, err
	}
	for b != '}' {
		if b != '"' {
			return nil, cr.syntax("$", "expected a string key in object")
		}
		raw, err := cr.value(b, maxComparisonKeyBytes, "$")
		if err != nil {
			return nil, err
		}
		rawKey := string(raw)
		var key string
		if err := jsonlimit.Unmarshal(raw, jsonlimit.Limits{}, &key); err != nil {
			return nil, err
		}
		if keys[key] {
			return nil, &jsonlimit.Error{Code: jsonlimit.CodeDuplicateKey, Path: "$", Key: key}
		}
		keys[key] = true
		path := "$." + key
		if b, err = cr.token(path); err != nil {
			return nil, err
		}
		if b != ':' {
			return nil, cr.syntax("$", "expected ':' after object key")
		}
		if b, err = cr.token(path); err != nil {
			return nil, err
		}
		if key == comparisonMetricRows || key == comparisonCaseRows {
			if err := cr.rowList(key, b); err != nil {
				return nil, err
			}
		} else {
			raw, err := cr.value(b, maxComparisonHeaderBytes, path)
			if err != nil {
				return nil, err
			}
			if len(cr.header)+len(rawKey)+len(raw)+2 > maxComparisonHeaderBytes {
				return nil, &jsonlimit.Error{Code: jsonlimit.CodeTooLarge, Limit: maxComparisonHeaderBytes, Path: path}
			}
			if len(cr.header) > 0 {
				cr.header = append(cr.header, ',')
			}
			cr.header = append(append(append(cr.header, rawKey...), ':'), raw...)
		}
		if b, err = cr.token("$"); err != nil {
			return nil, err
		}
		switch b {
		case ',':
			if b, err = cr.token("$"); err != nil {
				return nil, err
			}
			if b == '}' {
				return nil, cr.syntax("$", "expected a string key in object")
			}
		case '}':
		default:
			return nil, cr.syntax("$", "expected ',' or '}' in object")
		}
	}
	for {
		b, err := cr.next()
		if err == errComparisonEOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
			return nil, cr.syntax("$", "trailing data after the document")
		}
	}
	return cr.finish()
}

// finish decodes the fields outside the rows and checks them and the
// verdict, as DecodeComparison does for the whole document.
func (cr *comparisonReader) finish() (*Comparison, error) {
	bad := func(reason, detail string) error { return ReasonErr(CodeInvalidComparison, reason, detail) }
	doc := make([]byte, 0, len(cr.header)+2)
	doc = append(append(append(doc, '{'), cr.header...), '}')
	lim := jsonlimit.Limits{MaxBytes: maxComparisonHeaderBytes + 2}
	gen, err := jsonlimit.Decode(doc, lim)
	if err != nil {
		return nil, err
	}
	c := &cr.c
	metrics, cases := c.MetricDiffs, c.CaseDiffs
	if err := jsonlimit.Unmarshal(doc, lim, c); err != nil {
		return nil, err
	}
	c.MetricDiffs, c.CaseDiffs = metrics, cases
	if !cr.rows[comparisonMetricRows] || !cr.rows[comparisonCaseRows] {
		return nil, bad("inconsistent", "")
	}
	if reason := c.headerReason(); reason != "" {
		return nil, bad(reason, "")
	}
	if c.Passed == (cr.regression || c.PassRateDrop > c.MaxPassRateDrop) {
		return nil, bad("passed", "")
	}
	// The fields outside the rows are exactly their re-encoding's.
	head := *c
	head.MetricDiffs, head.CaseDiffs = nil, nil
	want, err := ToGeneric(head)
	if err != nil {
		return nil, bad("not_json", "")
	}
	m := want.(map[string]any)
	delete(m, comparisonMetricRows)
	delete(m, comparisonCaseRows)
	if path, ok := jsonClose(m, gen, "$"); !ok {
		return nil, bad("inconsistent", Bound(path))
	}
	if c.MetricDiffs == nil {
		c.MetricDiffs = []MetricDiff{}
	}
	if c.CaseDiffs == nil {
		c.CaseDiffs = []CaseDiff{}
	}
	c.checked = c
	return c, nil
}

// rowList reads the array of key's rows, whose first byte is b.
func (cr *comparisonReader) rowList(key string, b byte) error {
	path := "$." + key
	cr.rows[key] = true
	if b != '[' {
		raw, err := cr.value(b, maxComparisonHeaderBytes, path)
		if err != nil {
			return err
		}
		if string(raw) == "null" {
			// DecodeComparison: a null list is [] re-encoded.
			return ReasonErr(CodeInvalidComparison, "inconsistent", path)
		}
		return &jsonlimit.Error{Code: jsonlimit.CodeType, Path: path, Reason: "not an array"}
	}
	b, err := cr.token(path)
	if err != nil || b == ']' {
		return err
	}
	lim := jsonlimit.Limits{MaxBytes: maxComparisonRowBytes}
	for i := 0; ; i++ {
		rowPath := path + "[" + strconv.Itoa(i) + "]"
		if i == jsonlimit.OwnDocumentMaxList {
			return &jsonlimit.Error{Code: jsonlimit.CodeList, Limit: jsonlimit.OwnDocumentMaxList, Path: path}
		}
		raw, err := cr.value(b, maxComparisonRowBytes, rowPath)
		if err != nil {
			return err
		}
		if err := cr.row(key, raw, rowPath, lim); err != nil {
			return err
		}
		if b, err = cr.token(path); err != nil {
			return err
		}
		switch b {
		case ',':
			if b, err = cr.token(path); err != nil {
				return err
			}
		case ']':
			return nil
		default:
			return cr.syntax(path, "expected ',' or ']' in array")
		}
	}
}

// The fields of the two row types in their JSON order (MetricDiff's and
// CaseDiff's tags), and folded as encoding/json matches keys.
var (
	metricDiffNames  = []string{"metric_id", "baseline_score", "current_score", "score_drop", "tolerance", "regression", "reason"}
	caseDiffNames    = []string{"case_id", "baseline_status", "current_status", "trajectory_changed", "regression", "reason"}
	metricDiffFolded = foldedNames(metricDiffNames...)
	caseDiffFolded   = foldedNames(caseDiffNames...)
)

// row decodes and checks one row (raw, at rowPath) of key's list in one
// pass through a jsonlimit.Scanner (decodeRow). It refuses what the
// three readings before it refused (jsonlimit.Decode, jsonlimit.Unmarshal
// and the comparison with the row's re-encoding), with their errors in
// their order: a limit or syntax error anywhere in the row; the first
// unknown key or value of the wrong type; the row's order, verdict and
// reason against the row before it; then a row its re-encoding would not
// repeat (a field missing, null, or given by a key that matches only by
// encoding/json's case folding): inconsistent, naming the field.
func (cr *comparisonReader) row(key string, raw []byte, rowPath string, lim jsonlimit.Limits) error {
	d := &cr.dec
	var reason string
	var rf rowFields
	var err error
	if key == comparisonMetricRows {
		var m MetricDiff
		rf, err = cr.decodeRow(raw, lim, metricDiffNames, metricDiffFolded, func(i int) error {
			switch i {
			case 0:
				return d.stringField(&m.MetricID)
			case 1:
				return d.floatField(&m.BaselineScore)
			case 2:
				return d.floatField(&m.CurrentScore)
			case 3:
				return d.floatField(&m.ScoreDrop)
			case 4:
				return d.floatField(&m.Tolerance)
			case 5:
				return d.boolField(&m.Regression)
			default:
				return d.stringField(&m.Reason)
			}
		})
		if err != nil {
			return rowPathErr(err, rowPath)
		}
		var prev *MetricDiff
		if n := len(cr.c.MetricDiffs); n > 0 {
			prev = &cr.c.MetricDiffs[n-1]
		}
		reason = metricDiffReason(prev, &m)
		m.Reason = internReason(m.Reason)
		cr.c.MetricDiffs = append(cr.c.MetricDiffs, m)
		cr.regression = cr.regression || m.Regression
	} else {
		var c CaseDiff
		rf, err = cr.decodeRow(raw, lim, caseDiffNames, caseDiffFolded, func(i int) error {
			switch i {
			case 0:
				return d.stringField(&c.CaseID)
			case 1:
				return d.stringField(&c.BaselineStatus)
			case 2:
				return d.stringField(&c.CurrentStatus)
			case 3:
				return d.boolField(&c.TrajectoryChanged)
			case 4:
				return d.boolField(&c.Regression)
			default:
				return d.stringField(&c.Reason)
			}
		})
		if err != nil {
			return rowPathErr(err, rowPath)
		}
		var prev *CaseDiff
		if n := len(cr.c.CaseDiffs); n > 0 {
			prev = &cr.c.CaseDiffs[n-1]
		}
		reason = caseDiffReason(prev, &c)
		c.BaselineStatus, c.CurrentStatus, c.Reason = internStatus(c.BaselineStatus), internStatus(c.CurrentStatus), internReason(c.Reason)
		cr.c.CaseDiffs = append(cr.c.CaseDiffs, c)
		cr.regression = cr.regression || c.Regression
	}
	if reason != "" {
		return ReasonErr(CodeInvalidComparison, reason, rowPath)
	}
	if rf.differs {
		return ReasonErr(CodeInvalidComparison, "inconsistent", Bound(rowPath+rf.at))
	}
	return nil
}

// rowFields is what decodeRow found of a row besides its values: whether
// its re-encoding would differ from it, and where (".field": the first
// field missing, null, or given by a key that matches its name only by
// case folding; "": the row, null).
type rowFields struct {
	differs bool
	at      string
}

// decodeRow checks raw against lim and decodes it, an object of the
// fields names (folded: as encoding/json folds them), calling field with
// each key's index with its value next; field leaves a null value as it
// is, as encoding/json does. Its error is jsonlimit.Check's for a row
// Check refuses, else the first unknown key or wrong JSON type, as
// jsonlimit.Unmarshal names them.
func (cr *comparisonReader) decodeRow(raw []byte, lim jsonlimit.Limits, names, folded []string, field func(i int) error) (rowFields, error) {
	d := &cr.dec
	var rf rowFields
	refused := func(err error) (rowFields, error) {
		// Where the types stopped reading the row, a limit or syntax
		// error after that point is the row's error, as when Check ran
		// first; only a refused row pays for it.
		if cerr := jsonlimit.Check(raw, lim); cerr != nil {
			return rf, cerr
		}
		return rf, err
	}
	if err := d.s.Reset(raw, lim); err != nil {
		return rf, err
	}
	switch d.s.NextByte() {
	case 'n':
		// encoding/json decodes null into nothing; its re-encoding is
		// an object.
		if err := d.s.Skip(); err != nil {
			return rf, err
		}
		rf.differs = true
		return rf, d.s.End()
	case '{':
	default:
		return refused(jsonlimit.TypeError("$"))
	}
	if err := d.s.Object(); err != nil {
		return rf, err
	}
	var exact uint
	for next := 0; ; {
		key, more, err := d.s.Key()
		if err != nil {
			return rf, err
		}
		if !more {
			break
		}
		i := next
		if i >= len(names) || string(key) != names[i] {
			if i = slices.Index(names, string(key)); i < 0 {
				if i = fieldIndex(key, names, folded, &d.fold); i < 0 {
					return refused(jsonlimit.UnknownFieldError(key))
				}
				if !rf.differs {
					rf.differs, rf.at = true, "."+names[i]
				}
			}
		}
		if string(key) == names[i] {
			exact |= 1 << i
		}
		next = i + 1
		if d.s.NextByte() == 'n' && !rf.differs {
			rf.differs, rf.at = true, "."+names[i]
		}
		if err := field(i); err != nil {
			if err == errScanLine {
				return refused(jsonlimit.TypeError("$." + names[i]))
			}
			return rf, err
		}
	}
	if err := d.s.End(); err != nil {
		return rf, err
	}
	for i, n := range names {
		if exact&(1<<i) == 0 {
			return rowFields{differs: true, at: "." + n}, nil
		}
	}
	return rf, nil
}

// rowPathErr puts a row's jsonlimit error at the row's place in the
// document ($.case_diffs[3].regression for the row's $.regression).
func rowPathErr(err error, rowPath string) error {
	var je *jsonlimit.Error
	if errors.As(err, &je) {
		e := *je
		e.Path = rowPath + strings.TrimPrefix(e.Path, "$")
		return &e
	}
	return err
}

// internStatus and internReason share the few strings a row's status and
// reason are, so 100,000 rows hold one copy of each.
func internStatus(s string) string {
	for _, known := range [...]string{SampleStatusPassed, SampleStatusFailed, SampleStatusError, CaseStatusPartial, CaseStatusMissing} {
		if s == known {
			return known
		}
	}
	return s
}

func internReason(s string) string {
	for _, known := range [...]string{ReasonNone, ReasonScoreDrop, ReasonMissingCurrentMetric, ReasonMissingCurrentCase, ReasonCaseNoLongerPasses} {
		if s == known {
			return known
		}
	}
	return s
}
