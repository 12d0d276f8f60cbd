package canonjson

// A caller that writes one struct type's fields itself, without reflection
// (evalcore's sample encoder), builds the document from these pieces and
// must give exactly Marshal's bytes. Each piece fails where Marshal's
// reflected encoding of the enclosing value would stop, so on any error
// the caller encodes the whole value with Marshal, which then repairs it
// through encoding/json or refuses it exactly as before.

// AppendString appends s as Marshal writes a string; invalid UTF-8 is an
// error.
func AppendString(dst []byte, s string) ([]byte, error) {
	e := encoder{buf: dst}
	if err := e.str(s); err != nil {
		return dst, err
	}
	return e.buf, nil
}

// AppendFloat appends f as Marshal writes a float64; NaN and ±Inf are
// errors.
func AppendFloat(dst []byte, f float64) ([]byte, error) {
	e := encoder{buf: dst}
	if err := e.float(f); err != nil {
		return dst, err
	}
	return e.buf, nil
}

// AppendNested appends v as Marshal's reflected encoding writes a value
// found inside depth containers (structs, slices, maps, pointers) of the
// value it was given: MaxDepth counts those containers too, and anything
// the reflected encoding cannot write by itself (a value it would pass
// through encoding/json to repair or refuse) is an error instead. On an
// error dst is returned as it was.
func AppendNested(dst []byte, v any, depth int) ([]byte, error) {
	return appendValue(dst, v, true, depth)
}
