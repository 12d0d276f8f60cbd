package canonjson

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
)

// Values that are not generic (structs, typed slices and maps, pointers)
// used to take one path: encoding/json marshals the value, a decoder reads
// the bytes back into generic values, and those are canonicalised. For a
// 10,000-sample result that round trip was about half of rendering's CPU.
// reflected writes the same bytes straight from the value for the subset
// of types whose encoding/json form it reproduces exactly; any other type
// (a Marshaler, an embedded field, a ",string" option, []byte, ...) takes
// the round trip for just that value, which gives the same bytes because
// canonicalisation is compositional. When anything fails inside (a NaN,
// invalid UTF-8, a cycle), the whole value is encoded again through the
// round trip, so errors and encoding/json's repairs (U+FFFD for invalid
// UTF-8 in a struct's string) are exactly as before.

// reflected encodes v (not one of the generic types of value) by
// reflection, falling back to the encoding/json round trip as above.
func (e *encoder) reflected(v any) error {
	if e.reflecting {
		return e.reflectValue(reflect.ValueOf(v))
	}
	mark, depth := len(e.buf), len(e.path)
	e.reflecting = true
	// A failure returns at once, leaving the containers' depth counted:
	// rdepth is reset here either way.
	err := e.reflectValue(reflect.ValueOf(v))
	e.reflecting, e.rdepth = false, 0
	if err == nil {
		return nil
	}
	e.buf, e.path = e.buf[:mark], e.path[:depth]
	return e.viaEncodingJSON(v)
}

// errOutside stops the reflected encoding: the value is outside what it
// reproduces, so the caller starts again through encoding/json.
var errOutside = &Error{Code: CodeUnsupported}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	numberType        = reflect.TypeFor[json.Number]()
)

// reflectValue writes v. e.rdepth counts the containers entered, with the
// generic path's, against MaxDepth, so a cyclic value stops.
func (e *encoder) reflectValue(v reflect.Value) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	return e.reflectTyped(v, typeInfoOf(v.Type()))
}

// reflectTyped writes v, a valid value whose type's info is ti (the
// containers keep their elements' and fields' infos, so a value's
// parts are not looked up in typeInfos one by one).
func (e *encoder) reflectTyped(v reflect.Value, ti *typeInfo) error {
	switch {
	case ti.marshals:
		return e.viaEncodingJSON(v.Interface())
	case ti.ptrMarshals && v.CanAddr():
		// encoding/json calls a pointer method on an addressable value.
		return e.viaEncodingJSON(v.Addr().Interface())
	case ti.outside:
		return e.via(v)
	}
	if ti.generic {
		// map[string]any, []any and the like: the generic encoder walks
		// them without reflection.
		return e.value(v.Interface())
	}
	switch ti.kind {
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	case reflect.Float32:
		return e.value(float32(v.Float()))
	case reflect.Float64:
		return e.float(v.Float())
	case reflect.String:
		if ti.number {
			n := v.String()
			if n == "" {
				n = "0" // encoding/json writes an empty Number as 0
			}
			return e.number(n)
		}
		return e.str(v.String())
	case reflect.Interface:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.value(v.Elem().Interface())
	case reflect.Pointer:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if !e.enter() {
			return errOutside
		}
		if err := e.reflectTyped(v.Elem(), ti.elemInfo()); err != nil {
			return err
		}
		e.leave()
		return nil
	case reflect.Struct:
		return e.reflectStruct(v, ti)
	case reflect.Map:
		return e.reflectMap(v, ti)
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.reflectArray(v, ti)
	case reflect.Array:
		return e.reflectArray(v, ti)
	default:
		return errOutside // complex, chan, func: encoding/json refuses them
	}
	return nil
}

// enter counts a container against MaxDepth; false when it is too deep.
func (e *encoder) enter() bool {
	e.rdepth++
	return e.rdepth+len(e.path) <= MaxDepth
}

func (e *encoder) leave() { e.rdepth-- }

// via encodes one value through encoding/json, keeping its addressability
// (through which encoding/json finds pointer methods of its fields).
func (e *encoder) via(v reflect.Value) error {
	if v.CanAddr() {
		return e.viaEncodingJSON(v.Addr().Interface())
	}
	return e.viaEncodingJSON(v.Interface())
}

func (e *encoder) reflectArray(v reflect.Value, ti *typeInfo) error {
	if !e.enter() {
		return errOutside
	}
	elem := ti.elemInfo()
	e.buf = append(e.buf, '[')
	for i := range v.Len() {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.reflectTyped(v.Index(i), elem); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	e.leave()
	return nil
}

func (e *encoder) reflectMap(v reflect.Value, ti *typeInfo) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	type member struct {
		key string
		val reflect.Value
	}
	members := make([]member, 0, v.Len())
	for it := v.MapRange(); it.Next(); {
		members = append(members, member{it.Key().String(), it.Value()})
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.key, b.key) })
	if !e.enter() {
		return errOutside
	}
	elem := ti.elemInfo()
	e.buf = append(e.buf, '{')
	for i, m := range members {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.str(m.key); err != nil {
			return err
		}
		e.buf = append(e.buf, ':')
		if err := e.reflectTyped(m.val, elem); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	e.leave()
	return nil
}

func (e *encoder) reflectStruct(v reflect.Value, ti *typeInfo) error {
	if !e.enter() {
		return errOutside
	}
	e.buf = append(e.buf, '{')
	first := true
	for i := range ti.fields {
		f := &ti.fields[i]
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyValue(fv) {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = append(e.buf, f.quoted...)
		if err := e.reflectTyped(fv, f.info()); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	e.leave()
	return nil
}

// typeInfo is what reflectValue needs to know of a type: whether
// encoding/json calls a method of it (or of its pointer), whether its
// encoding is more than this file reproduces (outside), and a struct's
// encoded fields in canonical key order.
type typeInfo struct {
	marshals, ptrMarshals bool
	outside               bool
	generic               bool // one of the types value handles itself
	kind                  reflect.Kind
	number                bool // json.Number
	fields                []fieldInfo
	// elem is the info of a pointer's, slice's, array's or map's element
	// type, found on first use (a type may contain itself).
	elem infoCache
}

// infoCache holds the typeInfo of one type once it is first needed.
type infoCache struct {
	t  reflect.Type
	ti *atomic.Pointer[typeInfo]
}

func newInfoCache(t reflect.Type) infoCache {
	return infoCache{t: t, ti: new(atomic.Pointer[typeInfo])}
}

func (c infoCache) get() *typeInfo {
	if ti := c.ti.Load(); ti != nil {
		return ti
	}
	ti := typeInfoOf(c.t)
	c.ti.Store(ti)
	return ti
}

// elemInfo is the info of ti's element type.
func (ti *typeInfo) elemInfo() *typeInfo { return ti.elem.get() }

// genericTypes are the container types value encodes without reflection.
var genericTypes = map[reflect.Type]bool{
	reflect.TypeFor[map[string]any]():    true,
	reflect.TypeFor[map[string]string](): true,
	reflect.TypeFor[[]any]():             true,
	reflect.TypeFor[[]string]():          true,
}

type fieldInfo struct {
	index     int
	quoted    []byte // the canonical key and its colon
	omitEmpty bool
	typ       infoCache
}

// info is the info of the field's type.
func (f *fieldInfo) info() *typeInfo { return f.typ.get() }

var typeInfos sync.Map // reflect.Type → *typeInfo

func typeInfoOf(t reflect.Type) *typeInfo {
	if v, ok := typeInfos.Load(t); ok {
		return v.(*typeInfo)
	}
	ti := &typeInfo{marshals: marshals(t), ptrMarshals: t.Kind() != reflect.Pointer && marshals(reflect.PointerTo(t)), generic: genericTypes[t],
		kind: t.Kind(), number: t == numberType}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		ti.elem = newInfoCache(t.Elem())
	}
	switch t.Kind() {
	case reflect.Struct:
		ti.fields, ti.outside = structFields(t)
	case reflect.Map:
		// Integer and TextMarshaler keys.
		ti.outside = t.Key().Kind() != reflect.String
	case reflect.Slice:
		// Base64, and encoding/json's rules for byte types with methods.
		ti.outside = t.Elem().Kind() == reflect.Uint8
	}
	v, _ := typeInfos.LoadOrStore(t, ti)
	return v.(*typeInfo)
}

// structFields lists t's encoded fields in canonical key order; outside
// when encoding/json's rules for t are more than this file reproduces.
func structFields(t reflect.Type) (_ []fieldInfo, outside bool) {
	type named struct {
		name string
		fieldInfo
	}
	var fields []named
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			return nil, true // embedded fields: promotion and dominance rules
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !isValidTag(name) {
			name = ""
		}
		if name == "" {
			name = sf.Name
		}
		f := named{name: name, fieldInfo: fieldInfo{index: i, typ: newInfoCache(sf.Type)}}
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "":
			case "omitempty":
				f.omitEmpty = true
			default:
				return nil, true // ",string", ",omitzero" and options to come
			}
		}
		fields = append(fields, f)
	}
	slices.SortFunc(fields, func(a, b named) int { return compareUTF16(a.name, b.name) })
	out := make([]fieldInfo, len(fields))
	for i, f := range fields {
		if i > 0 && fields[i-1].name == f.name {
			return nil, true // two fields of one name: encoding/json's dominance rules
		}
		k := &encoder{}
		if k.str(f.name) != nil {
			return nil, true
		}
		f.quoted = append(k.buf, ':')
		out[i] = f.fieldInfo
	}
	return out, false
}

// marshals reports whether encoding/json encodes values of t with their
// own method.
func marshals(t reflect.Type) bool {
	return t.Implements(marshalerType) || t.Implements(textMarshalerType)
}

// isEmptyValue is encoding/json's omitempty test.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// isValidTag is encoding/json's test of a tag name; an invalid one is
// ignored in favour of the field's name.
func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
			// Backslash and quote chars are reserved, but
			// otherwise any punctuation chars are allowed
			// in a tag name.
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
