package wire

import "encoding/binary"

// scanLimits are the resolved (non-zero) limits the scanner enforces.
type scanLimits struct {
	maxDepth    int
	maxElements int
	maxStrLen   int
}

// scanStackInline is how many open containers the scanner tracks without a
// heap allocation; deeper limits fall back to a slice.
const scanStackInline = 64

// scanMsgpack walks exactly one msgpack value that must span all of data,
// without decoding or allocating for it. It checks, before anything trusts
// a length header: that each declared container has at least one byte per
// element left, that each string/bin/ext payload fits in the remaining bytes
// and under maxStrLen, the nesting depth, and the total number of values.
// It never recurses, so hostile depth cannot grow the goroutine stack.
func scanMsgpack(data []byte, lim scanLimits) *WireError {
	var inline [scanStackInline]uint64
	stack := inline[:0]
	if lim.maxDepth > scanStackInline {
		stack = make([]uint64, 0, lim.maxDepth)
	}
	pos := 0
	n := len(data)
	elements := 0
	pending := uint64(1) // values still to read at the top level

	for {
		// Close finished containers.
		for len(stack) > 0 && stack[len(stack)-1] == 0 {
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			if pending == 0 {
				break
			}
			pending--
		} else {
			stack[len(stack)-1]--
		}

		elements++
		if elements > lim.maxElements {
			return wireErr(CodeTooManyElements, pos, "more values than MaxElements")
		}
		if pos >= n {
			return wireErr(CodeTruncated, pos, "value expected")
		}
		b := data[pos]
		start := pos
		pos++

		var (
			container bool
			count     uint64 // elements a container holds
			payload   uint64 // bytes a str/bin/ext carries after its header
			lenBytes  int    // width of a big-endian length field
			fixed     int    // fixed-size scalar payload
			isStr     bool
		)
		switch {
		case b <= 0x7f, b >= 0xe0, b == 0xc0, b == 0xc2, b == 0xc3:
			// fixint, negative fixint, nil, false, true
		case b >= 0x80 && b <= 0x8f:
			container, count = true, uint64(b&0x0f)*2
		case b >= 0x90 && b <= 0x9f:
			container, count = true, uint64(b&0x0f)
		case b >= 0xa0 && b <= 0xbf:
			isStr, payload = true, uint64(b&0x1f)
		default:
			switch b {
			case 0xc4, 0xd9: // bin8, str8
				isStr, lenBytes = true, 1
			case 0xc5, 0xda: // bin16, str16
				isStr, lenBytes = true, 2
			case 0xc6, 0xdb: // bin32, str32
				isStr, lenBytes = true, 4
			case 0xc7: // ext8: len, type, data
				isStr, lenBytes, fixed = true, 1, 1
			case 0xc8:
				isStr, lenBytes, fixed = true, 2, 1
			case 0xc9:
				isStr, lenBytes, fixed = true, 4, 1
			case 0xca: // float32
				fixed = 4
			case 0xcb: // float64
				fixed = 8
			case 0xcc, 0xd0:
				fixed = 1
			case 0xcd, 0xd1:
				fixed = 2
			case 0xce, 0xd2:
				fixed = 4
			case 0xcf, 0xd3:
				fixed = 8
			case 0xd4: // fixext1..16: type byte + data
				fixed = 2
			case 0xd5:
				fixed = 3
			case 0xd6:
				fixed = 5
			case 0xd7:
				fixed = 9
			case 0xd8:
				fixed = 17
			case 0xdc:
				container, lenBytes = true, 2
			case 0xdd:
				container, lenBytes = true, 4
			case 0xde:
				container, lenBytes = true, 2
			case 0xdf:
				container, lenBytes = true, 4
			default: // 0xc1 is reserved and never valid
				return wireErr(CodeMalformed, start, "reserved type byte")
			}
		}

		if lenBytes > 0 {
			if n-pos < lenBytes {
				return wireErr(CodeTruncated, start, "length header cut short")
			}
			var l uint64
			switch lenBytes {
			case 1:
				l = uint64(data[pos])
			case 2:
				l = uint64(binary.BigEndian.Uint16(data[pos:]))
			case 4:
				l = uint64(binary.BigEndian.Uint32(data[pos:]))
			}
			pos += lenBytes
			switch {
			case container && (b == 0xde || b == 0xdf):
				count = l * 2
			case container:
				count = l
			default:
				payload = l
			}
		}

		remaining := uint64(n - pos)
		if isStr {
			if payload > uint64(lim.maxStrLen) {
				return wireErr(CodeTooLarge, start, "string, bin or ext longer than MaxStrLen")
			}
			need := payload + uint64(fixed)
			if need > remaining {
				return wireErr(CodeTruncated, start, "declared length exceeds remaining bytes")
			}
			pos += int(need)
			continue
		}
		if fixed > 0 {
			if uint64(fixed) > remaining {
				return wireErr(CodeTruncated, start, "scalar cut short")
			}
			pos += fixed
			continue
		}
		if container {
			if len(stack)+1 > lim.maxDepth {
				return wireErr(CodeDepthExceeded, start, "nesting deeper than MaxDepth")
			}
			// Every element takes at least one byte, so a container that
			// claims more elements than bytes left is truncated (or hostile).
			if count > remaining {
				return wireErr(CodeTruncated, start, "declared length exceeds remaining bytes")
			}
			if count > uint64(lim.maxElements-elements) {
				return wireErr(CodeTooManyElements, start, "more values than MaxElements")
			}
			stack = append(stack, count)
		}
	}
	if pos != n {
		return wireErr(CodeMalformed, pos, "trailing bytes after the envelope")
	}
	return nil
}
