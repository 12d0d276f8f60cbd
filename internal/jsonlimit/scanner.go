package jsonlimit

// Scanner checks one document as Check does while its caller reads it a
// value at a time, for a decoder of its own types that would otherwise
// run after Check and scan the document a second time.
//
// The caller walks the document in order: NextByte says what the next
// value is, and each value is consumed by exactly one of Skip (checked,
// not built), Value (built as Decode builds it), StringValue,
// NumberValue, or Object then Key until it returns false (reading each
// key's value), or Array then Elem until it returns false (reading each
// element); End after the top-level value. Every limit and rule of Check
// is enforced in Check's order, with Check's errors (code, limit, path,
// key, offset), so a document walked to End without error is one Check
// accepts, and the first error returned is Check's error for the
// document. A caller that stops early (a value its types refuse) learns
// nothing about the rest: Check tells.
//
// After an error the Scanner must be Reset. A zero Scanner is ready for
// Reset, and reusing one keeps its buffers.
type Scanner struct {
	d      decoder
	frames []scanFrame
	lim    Limits // the Limits last given to Reset, before Normalize
	norm   Limits // lim normalized
	ok     bool   // norm is lim normalized
}

// scanFrame is an open array or object: its count of elements or keys so
// far and, for an object, where its keys start in d.seen (and their map
// past maxFewKeys).
type scanFrame struct {
	n         int
	seenStart int
	seen      map[string]struct{}
}

// Reset starts the scan of data under lim (zero fields take their
// defaults, as for Check). A document larger than lim.MaxBytes is
// refused here, like Check does; invalid limits wrap ErrInvalidLimits.
func (s *Scanner) Reset(data []byte, lim Limits) error {
	if !s.ok || lim != s.lim {
		norm, err := lim.Normalize()
		if err != nil {
			s.ok = false
			return err
		}
		s.lim, s.norm, s.ok = lim, norm, true
	}
	if len(data) > s.norm.MaxBytes {
		return &Error{Code: CodeTooLarge, Limit: s.norm.MaxBytes, Path: "$"}
	}
	// The buffers are kept; what they point into is dropped.
	clear(s.d.path[:cap(s.d.path)])
	clear(s.d.seen[:cap(s.d.seen)])
	s.d = decoder{data: data, lim: s.norm, path: s.d.path[:0], scratch: s.d.scratch[:0], seen: s.d.seen[:0]}
	s.frames = s.frames[:0]
	return nil
}

// NextByte is the first byte of the next value, after white space, or 0
// at the end of the document. It checks nothing.
func (s *Scanner) NextByte() byte {
	s.d.skipSpace()
	if s.d.pos >= len(s.d.data) {
		return 0
	}
	return s.d.data[s.d.pos]
}

// Skip checks the next value, of any type, without building it.
func (s *Scanner) Skip() error {
	s.d.skipSpace()
	_, err := s.d.value()
	return err
}

// Value checks the next value and builds it as Decode does
// (map[string]any, []any, string, json.Number, bool or nil).
func (s *Scanner) Value() (any, error) {
	s.d.skipSpace()
	s.d.build = true
	v, err := s.d.value()
	s.d.build = false
	return v, err
}

// StringValue checks the next value, a string (NextByte is '"'), and
// returns its decoded bytes, valid until the next call. A value of
// another type is CodeType.
func (s *Scanner) StringValue() ([]byte, error) {
	if err := s.start('"'); err != nil {
		return nil, err
	}
	return s.d.strBytes()
}

// NumberValue checks the next value, a number (NextByte is '-' or a
// digit), and returns its text. A value of another type is CodeType.
func (s *Scanner) NumberValue() ([]byte, error) {
	if err := s.start('0'); err != nil {
		return nil, err
	}
	start := s.d.pos
	if _, err := s.d.number(); err != nil {
		return nil, err
	}
	return s.d.data[start:s.d.pos], nil
}

// Object enters the next value, an object (NextByte is '{'): Key then
// reads its keys. A value of another type is CodeType.
func (s *Scanner) Object() error {
	if err := s.start('{'); err != nil {
		return err
	}
	return s.open()
}

// Key moves to the next key of the object being read and past its colon:
// it returns the key's decoded bytes (valid until the next call) and
// true, the key's value to be read next; or false after the object's
// closing brace.
func (s *Scanner) Key() ([]byte, bool, error) {
	d := &s.d
	f := &s.frames[len(s.frames)-1]
	if f.n == 0 {
		if d.pos < len(d.data) && d.data[d.pos] == '}' {
			d.pos++
			d.depth--
			s.close()
			return nil, false, nil
		}
	} else {
		d.path = d.path[:len(d.path)-1]
		more, err := d.objectNext()
		if err != nil {
			return nil, false, err
		}
		if !more {
			s.close()
			return nil, false, nil
		}
	}
	if err := d.keyStart(f.n); err != nil {
		return nil, false, err
	}
	if f.n == 0 {
		f.seenStart = len(d.seen)
	}
	key, err := d.checkedKey(f.seenStart, &f.seen)
	if err != nil {
		return nil, false, err
	}
	if err := d.colon(); err != nil {
		return nil, false, err
	}
	d.path = append(d.path, segment{rawKey: key, isKey: true})
	f.n++
	return key, true, nil
}

// Array enters the next value, an array (NextByte is '['): Elem then
// moves to its elements. A value of another type is CodeType.
func (s *Scanner) Array() error {
	if err := s.start('['); err != nil {
		return err
	}
	return s.open()
}

// Elem moves to the next element of the array being read: true, the
// element to be read next; or false after the array's closing bracket.
func (s *Scanner) Elem() (bool, error) {
	d := &s.d
	f := &s.frames[len(s.frames)-1]
	if f.n == 0 {
		if d.pos < len(d.data) && d.data[d.pos] == ']' {
			d.pos++
			d.depth--
			s.frames = s.frames[:len(s.frames)-1]
			return false, nil
		}
	} else {
		d.path = d.path[:len(d.path)-1]
		more, err := d.arrayNext()
		if err != nil {
			return false, err
		}
		if !more {
			s.frames = s.frames[:len(s.frames)-1]
			return false, nil
		}
	}
	if err := d.elementStart(f.n); err != nil {
		return false, err
	}
	f.n++
	return true, nil
}

// End checks that nothing but white space follows the top-level value.
func (s *Scanner) End() error {
	if len(s.frames) > 0 {
		return &Error{Code: CodeInvalidJSON, Path: s.d.pathString(), Offset: s.d.pos, Reason: "document not read to its end"}
	}
	s.d.skipSpace()
	if s.d.pos != len(s.d.data) {
		return s.d.syntax("trailing data after the document")
	}
	return nil
}

// start counts the next value, which must open with open ('0' for any
// number), as Check counts it.
func (s *Scanner) start(open byte) error {
	d := &s.d
	d.skipSpace()
	if err := d.valueStart(); err != nil {
		return err
	}
	c := d.data[d.pos]
	if c == open || open == '0' && (c == '-' || '0' <= c && c <= '9') {
		return nil
	}
	reason := "not an array"
	switch open {
	case '"':
		reason = "not a string"
	case '0':
		reason = "not a number"
	case '{':
		reason = "not an object"
	}
	return &Error{Code: CodeType, Path: d.pathString(), Reason: reason}
}

// open enters the array or object at d.pos, as Check does.
func (s *Scanner) open() error {
	d := &s.d
	if err := d.enter(); err != nil {
		return err
	}
	d.pos++
	d.skipSpace()
	s.frames = append(s.frames, scanFrame{})
	return nil
}

// close leaves the object being read, forgetting its keys.
func (s *Scanner) close() {
	f := &s.frames[len(s.frames)-1]
	if f.n > 0 && f.seen == nil {
		s.d.seen = s.d.seen[:f.seenStart]
	}
	s.frames = s.frames[:len(s.frames)-1]
}
