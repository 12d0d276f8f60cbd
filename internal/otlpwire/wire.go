package otlpwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Protobuf wire types.
const (
	wireVarint     = 0
	wireI64        = 1
	wireLen        = 2
	wireStartGroup = 3
	wireEndGroup   = 4
	wireI32        = 5
)

var (
	errInvalidLength        = errors.New("proto: negative length found during unmarshaling")
	errIntOverflow          = errors.New("proto: integer overflow")
	errUnexpectedEndOfGroup = errors.New("proto: unexpected end of group")
)

// The consume functions read the wire as pdata's generated decoders do,
// quirks included (a field number is the tag's low 32 bits; a group
// must not end on the buffer's last byte), so that a body pdata refuses
// is refused here and a body it reads is split into the same fields.

func consumeVarint(b []byte, pos int) (uint64, int, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errIntOverflow
		}
		if pos >= len(b) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		c := b[pos]
		pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, pos, nil
		}
	}
}

func consumeTag(b []byte, pos int) (int32, int8, int, error) {
	tag, pos, err := consumeVarint(b, pos)
	if err != nil {
		return 0, 0, 0, err
	}
	num := int32(tag >> 3)
	if num <= 0 {
		return 0, 0, 0, fmt.Errorf("proto: illegal field=%d (tag=%d, pos=%d)", num, tag, pos)
	}
	return num, int8(tag & 7), pos, nil
}

// consumeLen returns the bounds of a length-delimited value.
func consumeLen(b []byte, pos int) (int, int, error) {
	n, pos, err := consumeVarint(b, pos)
	if err != nil {
		return 0, 0, err
	}
	length := int(n)
	if length < 0 {
		return 0, 0, errInvalidLength
	}
	end := pos + length
	if end < 0 || end > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return pos, end, nil
}

func consumeFixed(b []byte, pos, size int) (int, error) {
	pos += size
	if pos < 0 || pos > len(b) {
		return 0, io.ErrUnexpectedEOF
	}
	return pos, nil
}

// consumeUnknown skips the value of a field of wire type wt.
func consumeUnknown(b []byte, pos int, wt int8) (int, error) {
	var err error
	depth := 0
	for pos < len(b) {
		switch wt {
		case wireVarint:
			_, pos, err = consumeVarint(b, pos)
			return pos, err
		case wireI64:
			return consumeFixed(b, pos, 8)
		case wireLen:
			_, pos, err = consumeLen(b, pos)
			return pos, err
		case wireStartGroup:
			depth++
		case wireEndGroup:
			if depth == 0 {
				return 0, errUnexpectedEndOfGroup
			}
			depth--
		case wireI32:
			return consumeFixed(b, pos, 4)
		default:
			return 0, fmt.Errorf("proto: illegal wireType %d", wt)
		}
		if depth == 0 {
			return pos, nil
		}
		if _, wt, pos, err = consumeTag(b, pos); err != nil {
			return 0, err
		}
	}
	return 0, io.ErrUnexpectedEOF
}

// consumeField skips one field's value: a length-delimited one by its
// length, anything else as an unknown field.
func consumeField(b []byte, pos int, wt int8) (int, error) {
	if wt == wireLen {
		_, end, err := consumeLen(b, pos)
		return end, err
	}
	return consumeUnknown(b, pos, wt)
}

func appendVarint(b []byte, v uint64) []byte {
	return binary.AppendUvarint(b, v)
}
