// Copyright 2016 The Snappy-Go Authors. All rights reserved.
// Copyright (c) 2019 Klaus Post. All rights reserved.
// Use of this source code is governed by a BSD-style license: the
// LICENSE file of github.com/klauspost/compress (BSD-3-Clause).

package tracestore

// This file is S2's dictionary block encoder (s2.Dict.Encode, the pure Go
// encodeBlockDictGo of github.com/klauspost/compress v1.20.3) with one
// change: its 64 KiB hash table is not zeroed on every call. Zeroing it
// cost more than compressing a ~450-byte record (520 of 850 ns). Here each
// entry carries the generation of the call that wrote it, and an entry of
// another generation reads as zero, exactly as in the fresh table, so the
// output is byte for byte s2's (TestDictEncoder_MatchesS2, FuzzDictEncoder).
// Only the table access lines differ from the original: e.get/e.set.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/klauspost/compress/s2"
)

const (
	s2TagLiteral         = 0x00
	s2TagCopy1           = 0x01
	s2TagCopy2           = 0x02
	s2TagCopy4           = 0x03
	s2InputMargin        = 8
	s2MinNonLiteralBlock = 32
	s2MaxDictSrcOffset   = s2.MaxDictSrcOffset
	s2DictTableBits      = 14
	s2DictMaxTableSize   = 1 << s2DictTableBits
)

// s2Dict is the encoder-side state of an S2 dictionary: what s2.MakeDict
// and Dict.initFast compute.
type s2Dict struct {
	dict      []byte
	repeat    int
	fastTable [s2DictMaxTableSize]uint16
}

// newS2Dict mirrors s2.MakeDict(data, searchStart) and Dict.initFast.
func newS2Dict(data, searchStart []byte) *s2Dict {
	if len(data) > s2.MaxDictSize {
		data = data[len(data)-s2.MaxDictSize:]
	}
	d := &s2Dict{dict: append(make([]byte, 0, len(data)+16), data...)}
	for s := len(searchStart); s > 4; s-- {
		if idx := bytes.LastIndex(data, searchStart[:s]); idx >= 0 && idx <= len(data)-8 {
			d.repeat = idx
			break
		}
	}
	for i := 0; i < len(d.dict)-8-2; i += 3 {
		x0 := s2Load64(d.dict, i)
		h0 := s2Hash6(x0, s2DictTableBits)
		h1 := s2Hash6(x0>>8, s2DictTableBits)
		h2 := s2Hash6(x0>>16, s2DictTableBits)
		d.fastTable[h0] = uint16(i)
		d.fastTable[h1] = uint16(i + 1)
		d.fastTable[h2] = uint16(i + 2)
	}
	return d
}

// dictEncoder is a reusable (not concurrent) encoder of one dictionary.
type dictEncoder struct {
	dict  *s2Dict
	gen   uint16
	gens  [s2DictMaxTableSize]uint16
	table [s2DictMaxTableSize]uint32
}

func (e *dictEncoder) get(h uint32) int {
	if e.gens[h] != e.gen {
		return 0
	}
	return int(e.table[h])
}

func (e *dictEncoder) set(h uint32, v int) {
	e.gens[h], e.table[h] = e.gen, uint32(v)
}

// Encode is s2.Dict.Encode: dst must have room for s2.MaxEncodedLen(len(src)).
func (e *dictEncoder) Encode(dst, src []byte) []byte {
	if n := s2.MaxEncodedLen(len(src)); n < 0 {
		panic(s2.ErrTooLarge)
	} else if cap(dst) < n {
		dst = make([]byte, n)
	} else {
		dst = dst[:n]
	}
	dstP := binary.PutUvarint(dst, uint64(len(src)))
	if len(src) == 0 {
		return dst[:dstP]
	}
	if len(src) < s2MinNonLiteralBlock {
		dstP += s2EmitLiteral(dst[dstP:], src)
		return dst[:dstP]
	}
	e.gen++
	if e.gen == 0 { // wrapped: entries of the old generation 1 would read as live
		clear(e.gens[:])
		e.gen = 1
	}
	n := e.encodeBlockDict(dst[dstP:], src)
	if n > 0 {
		dstP += n
		return dst[:dstP]
	}
	dstP += s2EmitLiteral(dst[dstP:], src)
	return dst[:dstP]
}

func s2Load32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }
func s2Load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

func s2Hash6(u uint64, h uint8) uint32 {
	const prime6bytes = 227718039650203
	return uint32(((u << (64 - 48)) * prime6bytes) >> ((64 - h) & 63))
}

// encodeBlockDict encodes a non-empty src to a guaranteed-large-enough dst. It
// assumes that the varint-encoded length of the decompressed bytes has already
// been written.
//
// It also assumes that:
//
//	len(dst) >= MaxEncodedLen(len(src)) &&
//	minNonLiteralBlockSize <= len(src) && len(src) <= maxBlockSize
func (e *dictEncoder) encodeBlockDict(dst, src []byte) (d int) {
	dict := e.dict
	// Initialize the hash table.
	const (
		tableBits    = 14
		maxTableSize = 1 << tableBits
		maxAhead     = 8 // maximum bytes ahead without checking sLimit

		debug = false
	)

	// sLimit is when to stop looking for offset/length copies. The s2InputMargin
	// lets us use a fast path for s2EmitLiteral in the main loop, while we are
	// looking for copies.
	sLimit := min(len(src)-s2InputMargin, s2MaxDictSrcOffset-maxAhead)

	// Bail if we can't compress to at least this.
	dstLimit := len(src) - len(src)>>5 - 5

	// nextEmit is where in src the next s2EmitLiteral should start from.
	nextEmit := 0

	// The encoded form can start with a dict entry (copy or repeat).
	s := 0

	// Convert dict repeat to offset
	repeat := len(dict.dict) - dict.repeat
	cv := s2Load64(src, 0)

	// While in dict
searchDict:
	for {
		// Next src position to check
		nextS := s + (s-nextEmit)>>6 + 4
		hash0 := s2Hash6(cv, tableBits)
		hash1 := s2Hash6(cv>>8, tableBits)
		if nextS > sLimit {
			if debug {
				fmt.Println("slimit reached", s, nextS)
			}
			break searchDict
		}
		candidateDict := int(dict.fastTable[hash0])
		candidateDict2 := int(dict.fastTable[hash1])
		candidate2 := e.get(hash1)
		candidate := e.get(hash0)
		e.set(hash0, s)
		e.set(hash1, s+1)
		hash2 := s2Hash6(cv>>16, tableBits)

		// Check repeat at offset checkRep.
		const checkRep = 1

		if repeat > s {
			candidate := len(dict.dict) - repeat + s
			if repeat-s >= 4 && uint32(cv) == s2Load32(dict.dict, candidate) {
				// Extend back
				base := s
				for i := candidate; base > nextEmit && i > 0 && dict.dict[i-1] == src[base-1]; {
					i--
					base--
				}
				// Bail if we exceed the maximum size.
				if d+(base-nextEmit) > dstLimit {
					return 0
				}

				d += s2EmitLiteral(dst[d:], src[nextEmit:base])
				if debug && nextEmit != base {
					fmt.Println("emitted ", base-nextEmit, "literals")
				}
				s += 4
				candidate += 4
				for candidate < len(dict.dict)-8 && s <= len(src)-8 {
					if diff := s2Load64(src, s) ^ s2Load64(dict.dict, candidate); diff != 0 {
						s += bits.TrailingZeros64(diff) >> 3
						break
					}
					s += 8
					candidate += 8
				}
				d += s2EmitRepeat(dst[d:], repeat, s-base)
				if debug {
					fmt.Println("emitted dict repeat length", s-base, "offset:", repeat, "s:", s)
				}
				nextEmit = s
				if s >= sLimit {
					break searchDict
				}
				cv = s2Load64(src, s)
				continue
			}
		} else if repeat > 0 && uint32(cv>>(checkRep*8)) == s2Load32(src, s-repeat+checkRep) {
			base := s + checkRep
			// Extend back
			for i := base - repeat; base > nextEmit && i > 0 && src[i-1] == src[base-1]; {
				i--
				base--
			}
			d += s2EmitLiteral(dst[d:], src[nextEmit:base])
			if debug && nextEmit != base {
				fmt.Println("emitted ", base-nextEmit, "literals")
			}

			// Extend forward
			candidate := s - repeat + 4 + checkRep
			s += 4 + checkRep
			for s <= sLimit {
				if diff := s2Load64(src, s) ^ s2Load64(src, candidate); diff != 0 {
					s += bits.TrailingZeros64(diff) >> 3
					break
				}
				s += 8
				candidate += 8
			}
			if debug {
				// Validate match.
				if s <= candidate {
					panic("s <= candidate")
				}
				a := src[base:s]
				b := src[base-repeat : base-repeat+(s-base)]
				if !bytes.Equal(a, b) {
					panic("mismatch")
				}
			}

			if nextEmit > 0 {
				// same as `add := s2EmitCopy(dst[d:], repeat, s-base)` but skips storing offset.
				d += s2EmitRepeat(dst[d:], repeat, s-base)
			} else {
				// First match, cannot be repeat.
				d += s2EmitCopy(dst[d:], repeat, s-base)
			}

			nextEmit = s
			if s >= sLimit {
				break searchDict
			}
			if debug {
				fmt.Println("emitted reg repeat", s-base, "s:", s)
			}
			cv = s2Load64(src, s)
			continue searchDict
		}
		if s == 0 {
			cv = s2Load64(src, nextS)
			s = nextS
			continue searchDict
		}
		// Start with table. These matches will always be closer.
		if uint32(cv) == s2Load32(src, candidate) {
			goto emitMatch
		}
		candidate = e.get(hash2)
		if uint32(cv>>8) == s2Load32(src, candidate2) {
			e.set(hash2, s+2)
			candidate = candidate2
			s++
			goto emitMatch
		}

		// Check dict. Dicts have longer offsets, so we want longer matches.
		if cv == s2Load64(dict.dict, candidateDict) {
			e.set(hash2, s+2)
			goto emitDict
		}

		candidateDict = int(dict.fastTable[hash2])
		// Check if upper 7 bytes match
		if candidateDict2 >= 1 {
			if cv^s2Load64(dict.dict, candidateDict2-1) < (1 << 8) {
				e.set(hash2, s+2)
				candidateDict = candidateDict2
				s++
				goto emitDict
			}
		}

		e.set(hash2, s+2)
		if uint32(cv>>16) == s2Load32(src, candidate) {
			s += 2
			goto emitMatch
		}
		if candidateDict >= 2 {
			// Check if upper 6 bytes match
			if cv^s2Load64(dict.dict, candidateDict-2) < (1 << 16) {
				s += 2
				goto emitDict
			}
		}

		cv = s2Load64(src, nextS)
		s = nextS
		continue searchDict

	emitDict:
		{
			if debug {
				if s2Load32(dict.dict, candidateDict) != s2Load32(src, s) {
					panic("dict emit mismatch")
				}
			}
			// Extend backwards.
			// The top bytes will be rechecked to get the full match.
			for candidateDict > 0 && s > nextEmit && dict.dict[candidateDict-1] == src[s-1] {
				candidateDict--
				s--
			}

			// Bail if we exceed the maximum size.
			if d+(s-nextEmit) > dstLimit {
				return 0
			}

			// A 4-byte match has been found. We'll later see if more than 4 bytes
			// match. But, prior to the match, src[nextEmit:s] are unmatched. Emit
			// them as literal bytes.

			d += s2EmitLiteral(dst[d:], src[nextEmit:s])
			if debug && nextEmit != s {
				fmt.Println("emitted ", s-nextEmit, "literals")
			}
			{
				// Invariant: we have a 4-byte match at s, and no need to emit any
				// literal bytes prior to s.
				base := s
				repeat = s + (len(dict.dict)) - candidateDict

				// Extend the 4-byte match as long as possible.
				s += 4
				candidateDict += 4
				for s <= len(src)-8 && len(dict.dict)-candidateDict >= 8 {
					if diff := s2Load64(src, s) ^ s2Load64(dict.dict, candidateDict); diff != 0 {
						s += bits.TrailingZeros64(diff) >> 3
						break
					}
					s += 8
					candidateDict += 8
				}

				// Matches longer than 64 are split.
				if s <= sLimit || s-base < 8 {
					d += s2EmitCopy(dst[d:], repeat, s-base)
				} else {
					// Split to ensure we don't start a copy within next block
					d += s2EmitCopy(dst[d:], repeat, 4)
					d += s2EmitRepeat(dst[d:], repeat, s-base-4)
				}
				if false {
					// Validate match.
					if s <= candidate {
						panic("s <= candidate")
					}
					a := src[base:s]
					b := dict.dict[base-repeat : base-repeat+(s-base)]
					if !bytes.Equal(a, b) {
						panic("mismatch")
					}
				}
				if debug {
					fmt.Println("emitted dict copy, length", s-base, "offset:", repeat, "s:", s)
				}
				nextEmit = s
				if s >= sLimit {
					break searchDict
				}

				if d > dstLimit {
					// Do we have space for more, if not bail.
					return 0
				}

				// Index and continue loop to try new candidate.
				x := s2Load64(src, s-2)
				m2Hash := s2Hash6(x, tableBits)
				currHash := s2Hash6(x>>8, tableBits)
				e.set(m2Hash, s-2)
				e.set(currHash, s-1)
				cv = s2Load64(src, s)
			}
			continue
		}
	emitMatch:

		// Extend backwards.
		// The top bytes will be rechecked to get the full match.
		for candidate > 0 && s > nextEmit && src[candidate-1] == src[s-1] {
			candidate--
			s--
		}

		// Bail if we exceed the maximum size.
		if d+(s-nextEmit) > dstLimit {
			return 0
		}

		// A 4-byte match has been found. We'll later see if more than 4 bytes
		// match. But, prior to the match, src[nextEmit:s] are unmatched. Emit
		// them as literal bytes.

		d += s2EmitLiteral(dst[d:], src[nextEmit:s])
		if debug && nextEmit != s {
			fmt.Println("emitted ", s-nextEmit, "literals")
		}
		// Call s2EmitCopy, and then see if another s2EmitCopy could be our next
		// move. Repeat until we find no match for the input immediately after
		// what was consumed by the last s2EmitCopy call.
		//
		// If we exit this loop normally then we need to call s2EmitLiteral next,
		// though we don't yet know how big the literal will be. We handle that
		// by proceeding to the next iteration of the main loop. We also can
		// exit this loop via goto if we get close to exhausting the input.
		for {
			// Invariant: we have a 4-byte match at s, and no need to emit any
			// literal bytes prior to s.
			base := s
			repeat = base - candidate

			// Extend the 4-byte match as long as possible.
			s += 4
			candidate += 4
			for s <= len(src)-8 {
				if diff := s2Load64(src, s) ^ s2Load64(src, candidate); diff != 0 {
					s += bits.TrailingZeros64(diff) >> 3
					break
				}
				s += 8
				candidate += 8
			}

			d += s2EmitCopy(dst[d:], repeat, s-base)
			if debug {
				// Validate match.
				if s <= candidate {
					panic("s <= candidate")
				}
				a := src[base:s]
				b := src[base-repeat : base-repeat+(s-base)]
				if !bytes.Equal(a, b) {
					panic("mismatch")
				}
			}
			if debug {
				fmt.Println("emitted src copy, length", s-base, "offset:", repeat, "s:", s)
			}
			nextEmit = s
			if s >= sLimit {
				break searchDict
			}

			if d > dstLimit {
				// Do we have space for more, if not bail.
				return 0
			}
			// Check for an immediate match, otherwise start search at s+1
			x := s2Load64(src, s-2)
			m2Hash := s2Hash6(x, tableBits)
			currHash := s2Hash6(x>>16, tableBits)
			candidate = e.get(currHash)
			e.set(m2Hash, s-2)
			e.set(currHash, s)
			if debug && s == candidate {
				panic("s == candidate")
			}
			if uint32(x>>16) != s2Load32(src, candidate) {
				cv = s2Load64(src, s+1)
				s++
				break
			}
		}
	}

	// Search without dict:
	if repeat > s {
		repeat = 0
	}

	// No more dict
	sLimit = len(src) - s2InputMargin
	if s >= sLimit {
		goto emitRemainder
	}
	if debug {
		fmt.Println("non-dict matching at", s, "repeat:", repeat)
	}
	cv = s2Load64(src, s)
	if debug {
		fmt.Println("now", s, "->", sLimit, "out:", d, "left:", len(src)-s, "nextemit:", nextEmit, "dstLimit:", dstLimit, "s:", s)
	}
	for {
		candidate := 0
		for {
			// Next src position to check
			nextS := s + (s-nextEmit)>>6 + 4
			if nextS > sLimit {
				goto emitRemainder
			}
			hash0 := s2Hash6(cv, tableBits)
			hash1 := s2Hash6(cv>>8, tableBits)
			candidate = e.get(hash0)
			candidate2 := e.get(hash1)
			e.set(hash0, s)
			e.set(hash1, s+1)
			hash2 := s2Hash6(cv>>16, tableBits)

			// Check repeat at offset checkRep.
			const checkRep = 1
			if repeat > 0 && uint32(cv>>(checkRep*8)) == s2Load32(src, s-repeat+checkRep) {
				base := s + checkRep
				// Extend back
				for i := base - repeat; base > nextEmit && i > 0 && src[i-1] == src[base-1]; {
					i--
					base--
				}
				// Bail if we exceed the maximum size.
				if d+(base-nextEmit) > dstLimit {
					return 0
				}

				d += s2EmitLiteral(dst[d:], src[nextEmit:base])
				if debug && nextEmit != base {
					fmt.Println("emitted ", base-nextEmit, "literals")
				}
				// Extend forward
				candidate := s - repeat + 4 + checkRep
				s += 4 + checkRep
				for s <= sLimit {
					if diff := s2Load64(src, s) ^ s2Load64(src, candidate); diff != 0 {
						s += bits.TrailingZeros64(diff) >> 3
						break
					}
					s += 8
					candidate += 8
				}
				if debug {
					// Validate match.
					if s <= candidate {
						panic("s <= candidate")
					}
					a := src[base:s]
					b := src[base-repeat : base-repeat+(s-base)]
					if !bytes.Equal(a, b) {
						panic("mismatch")
					}
				}
				if nextEmit > 0 {
					// same as `add := s2EmitCopy(dst[d:], repeat, s-base)` but skips storing offset.
					d += s2EmitRepeat(dst[d:], repeat, s-base)
				} else {
					// First match, cannot be repeat.
					d += s2EmitCopy(dst[d:], repeat, s-base)
				}
				if debug {
					fmt.Println("emitted src repeat length", s-base, "offset:", repeat, "s:", s)
				}
				nextEmit = s
				if s >= sLimit {
					goto emitRemainder
				}

				cv = s2Load64(src, s)
				continue
			}

			if uint32(cv) == s2Load32(src, candidate) {
				break
			}
			candidate = e.get(hash2)
			if uint32(cv>>8) == s2Load32(src, candidate2) {
				e.set(hash2, s+2)
				candidate = candidate2
				s++
				break
			}
			e.set(hash2, s+2)
			if uint32(cv>>16) == s2Load32(src, candidate) {
				s += 2
				break
			}

			cv = s2Load64(src, nextS)
			s = nextS
		}

		// Extend backwards.
		// The top bytes will be rechecked to get the full match.
		for candidate > 0 && s > nextEmit && src[candidate-1] == src[s-1] {
			candidate--
			s--
		}

		// Bail if we exceed the maximum size.
		if d+(s-nextEmit) > dstLimit {
			return 0
		}

		// A 4-byte match has been found. We'll later see if more than 4 bytes
		// match. But, prior to the match, src[nextEmit:s] are unmatched. Emit
		// them as literal bytes.

		d += s2EmitLiteral(dst[d:], src[nextEmit:s])
		if debug && nextEmit != s {
			fmt.Println("emitted ", s-nextEmit, "literals")
		}
		// Call s2EmitCopy, and then see if another s2EmitCopy could be our next
		// move. Repeat until we find no match for the input immediately after
		// what was consumed by the last s2EmitCopy call.
		//
		// If we exit this loop normally then we need to call s2EmitLiteral next,
		// though we don't yet know how big the literal will be. We handle that
		// by proceeding to the next iteration of the main loop. We also can
		// exit this loop via goto if we get close to exhausting the input.
		for {
			// Invariant: we have a 4-byte match at s, and no need to emit any
			// literal bytes prior to s.
			base := s
			repeat = base - candidate

			// Extend the 4-byte match as long as possible.
			s += 4
			candidate += 4
			for s <= len(src)-8 {
				if diff := s2Load64(src, s) ^ s2Load64(src, candidate); diff != 0 {
					s += bits.TrailingZeros64(diff) >> 3
					break
				}
				s += 8
				candidate += 8
			}

			d += s2EmitCopy(dst[d:], repeat, s-base)
			if debug {
				// Validate match.
				if s <= candidate {
					panic("s <= candidate")
				}
				a := src[base:s]
				b := src[base-repeat : base-repeat+(s-base)]
				if !bytes.Equal(a, b) {
					panic("mismatch")
				}
			}
			if debug {
				fmt.Println("emitted src copy, length", s-base, "offset:", repeat, "s:", s)
			}
			nextEmit = s
			if s >= sLimit {
				goto emitRemainder
			}

			if d > dstLimit {
				// Do we have space for more, if not bail.
				return 0
			}
			// Check for an immediate match, otherwise start search at s+1
			x := s2Load64(src, s-2)
			m2Hash := s2Hash6(x, tableBits)
			currHash := s2Hash6(x>>16, tableBits)
			candidate = e.get(currHash)
			e.set(m2Hash, s-2)
			e.set(currHash, s)
			if debug && s == candidate {
				panic("s == candidate")
			}
			if uint32(x>>16) != s2Load32(src, candidate) {
				cv = s2Load64(src, s+1)
				s++
				break
			}
		}
	}

emitRemainder:
	if nextEmit < len(src) {
		// Bail if we exceed the maximum size.
		if d+len(src)-nextEmit > dstLimit {
			return 0
		}
		d += s2EmitLiteral(dst[d:], src[nextEmit:])
		if debug && nextEmit != s {
			fmt.Println("emitted ", len(src)-nextEmit, "literals")
		}
	}
	return d
}

// s2EmitLiteral writes a literal chunk and returns the number of bytes written.
func s2EmitLiteral(dst, lit []byte) int {
	if len(lit) == 0 {
		return 0
	}
	i, n := 0, uint(len(lit)-1)
	switch {
	case n < 60:
		dst[0] = uint8(n)<<2 | s2TagLiteral
		i = 1
	case n < 1<<8:
		dst[1] = uint8(n)
		dst[0] = 60<<2 | s2TagLiteral
		i = 2
	case n < 1<<16:
		dst[2] = uint8(n >> 8)
		dst[1] = uint8(n)
		dst[0] = 61<<2 | s2TagLiteral
		i = 3
	case n < 1<<24:
		dst[3] = uint8(n >> 16)
		dst[2] = uint8(n >> 8)
		dst[1] = uint8(n)
		dst[0] = 62<<2 | s2TagLiteral
		i = 4
	default:
		dst[4] = uint8(n >> 24)
		dst[3] = uint8(n >> 16)
		dst[2] = uint8(n >> 8)
		dst[1] = uint8(n)
		dst[0] = 63<<2 | s2TagLiteral
		i = 5
	}
	return i + copy(dst[i:], lit)
}

// s2EmitRepeat writes a repeat chunk and returns the number of bytes written.
// Length must be at least 4 and < 1<<24
func s2EmitRepeat(dst []byte, offset, length int) int {
	// Repeat offset, make length cheaper
	length -= 4
	if length <= 4 {
		dst[0] = uint8(length)<<2 | s2TagCopy1
		dst[1] = 0
		return 2
	}
	if length < 8 && offset < 2048 {
		// Encode WITH offset
		dst[1] = uint8(offset)
		dst[0] = uint8(offset>>8)<<5 | uint8(length)<<2 | s2TagCopy1
		return 2
	}
	if length < (1<<8)+4 {
		length -= 4
		dst[2] = uint8(length)
		dst[1] = 0
		dst[0] = 5<<2 | s2TagCopy1
		return 3
	}
	if length < (1<<16)+(1<<8) {
		length -= 1 << 8
		dst[3] = uint8(length >> 8)
		dst[2] = uint8(length >> 0)
		dst[1] = 0
		dst[0] = 6<<2 | s2TagCopy1
		return 4
	}
	const maxRepeat = (1 << 24) - 1
	length -= 1 << 16
	left := 0
	if length > maxRepeat {
		left = length - maxRepeat + 4
		length = maxRepeat - 4
	}
	dst[4] = uint8(length >> 16)
	dst[3] = uint8(length >> 8)
	dst[2] = uint8(length >> 0)
	dst[1] = 0
	dst[0] = 7<<2 | s2TagCopy1
	if left > 0 {
		return 5 + s2EmitRepeat(dst[5:], offset, left)
	}
	return 5
}

// s2EmitCopy writes a copy chunk and returns the number of bytes written.
//
// It assumes that:
//
//	dst is long enough to hold the encoded bytes
//	1 <= offset && offset <= math.MaxUint32
//	4 <= length && length <= 1 << 24
func s2EmitCopy(dst []byte, offset, length int) int {
	if offset >= 65536 {
		i := 0
		if length > 64 {
			// Emit a length 64 copy, encoded as 5 bytes.
			dst[4] = uint8(offset >> 24)
			dst[3] = uint8(offset >> 16)
			dst[2] = uint8(offset >> 8)
			dst[1] = uint8(offset)
			dst[0] = 63<<2 | s2TagCopy4
			length -= 64
			if length >= 4 {
				// Emit remaining as repeats
				return 5 + s2EmitRepeat(dst[5:], offset, length)
			}
			i = 5
		}
		if length == 0 {
			return i
		}
		// Emit a copy, offset encoded as 4 bytes.
		dst[i+0] = uint8(length-1)<<2 | s2TagCopy4
		dst[i+1] = uint8(offset)
		dst[i+2] = uint8(offset >> 8)
		dst[i+3] = uint8(offset >> 16)
		dst[i+4] = uint8(offset >> 24)
		return i + 5
	}

	// Offset no more than 2 bytes.
	if length > 64 {
		off := 3
		if offset < 2048 {
			// emit 8 bytes as s2TagCopy1, rest as repeats.
			dst[1] = uint8(offset)
			dst[0] = uint8(offset>>8)<<5 | uint8(8-4)<<2 | s2TagCopy1
			length -= 8
			off = 2
		} else {
			// Emit a length 60 copy, encoded as 3 bytes.
			// Emit remaining as repeat value (minimum 4 bytes).
			dst[2] = uint8(offset >> 8)
			dst[1] = uint8(offset)
			dst[0] = 59<<2 | s2TagCopy2
			length -= 60
		}
		// Emit remaining as repeats, at least 4 bytes remain.
		return off + s2EmitRepeat(dst[off:], offset, length)
	}
	if length >= 12 || offset >= 2048 {
		// Emit the remaining copy, encoded as 3 bytes.
		dst[2] = uint8(offset >> 8)
		dst[1] = uint8(offset)
		dst[0] = uint8(length-1)<<2 | s2TagCopy2
		return 3
	}
	// Emit the remaining copy, encoded as 2 bytes.
	dst[1] = uint8(offset)
	dst[0] = uint8(offset>>8)<<5 | uint8(length-4)<<2 | s2TagCopy1
	return 2
}
