package otlpwire

import (
	"fmt"
	"strconv"

	jsoniter "github.com/json-iterator/go"

	"github.com/fadcedab/adk/internal/jsonquote"
)

// Signal is what an export response answers for; it names the rejected
// count in JSON (rejectedSpans, rejectedLogRecords). In protobuf both are
// field 1 of partial_success.
type Signal uint8

// The signals.
const (
	Traces Signal = iota
	Logs
)

// PartialSuccess is an export response's partial_success: how many items
// the receiver rejected (rejected_spans or rejected_log_records) and why.
// The zero value is a full success.
type PartialSuccess struct {
	Rejected     int64
	ErrorMessage string
}

// AppendResponseProto appends the protobuf export response holding ps,
// the bytes pdata writes: partial_success is always present, empty on a
// full success.
func AppendResponseProto(b []byte, ps PartialSuccess) []byte {
	n := 0
	if ps.Rejected != 0 {
		n += 1 + varintLen(uint64(ps.Rejected))
	}
	if l := len(ps.ErrorMessage); l > 0 {
		n += 1 + varintLen(uint64(l)) + l
	}
	b = append(b, 0x0a)
	b = appendVarint(b, uint64(n))
	// pdata writes a message back to front from its first field, so
	// error_message (2) comes before rejected (1).
	if ps.ErrorMessage != "" {
		b = append(b, 0x12)
		b = appendVarint(b, uint64(len(ps.ErrorMessage)))
		b = append(b, ps.ErrorMessage...)
	}
	if ps.Rejected != 0 {
		b = append(b, 0x08)
		b = appendVarint(b, uint64(ps.Rejected))
	}
	return b
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// AppendResponseJSON appends the OTLP/JSON export response holding ps:
// {"partialSuccess":{...}}, the count a decimal string, as pdata writes it.
func AppendResponseJSON(b []byte, sig Signal, ps PartialSuccess) []byte {
	b = append(b, `{"partialSuccess":{`...)
	if ps.Rejected != 0 {
		if sig == Logs {
			b = append(b, `"rejectedLogRecords":"`...)
		} else {
			b = append(b, `"rejectedSpans":"`...)
		}
		b = strconv.AppendInt(b, ps.Rejected, 10)
		b = append(b, '"')
	}
	if ps.ErrorMessage != "" {
		if ps.Rejected != 0 {
			b = append(b, ',')
		}
		b = append(b, `"errorMessage":`...)
		b = appendJSONString(b, ps.ErrorMessage)
	}
	return append(b, "}}"...)
}

// appendJSONString quotes s as json-iterator's Stream.WriteString does
// (what pdata writes with), through the module's one quoter.
func appendJSONString(b []byte, s string) []byte { return jsonquote.Append(b, s, jsonquote.Iter) }

// ParseResponseProto reads a protobuf export response (traces or logs:
// the same fields) as pdata's ExportResponse.UnmarshalProto does: unknown
// fields are skipped, a repeated partial_success merges into one.
func ParseResponseProto(b []byte) (PartialSuccess, error) {
	var ps PartialSuccess
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return ps, err
		}
		if num != 1 {
			if pos, err = consumeUnknown(b, p, wt); err != nil {
				return ps, err
			}
			continue
		}
		if wt != wireLen {
			return ps, fmt.Errorf("proto: wrong wireType = %d for field PartialSuccess", wt)
		}
		start, end, err := consumeLen(b, p)
		if err != nil {
			return ps, err
		}
		if err := parsePartialSuccessProto(b[start:end], &ps); err != nil {
			return ps, err
		}
		pos = end
	}
	return ps, nil
}

func parsePartialSuccessProto(b []byte, ps *PartialSuccess) error {
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return err
		}
		switch num {
		case 1:
			if wt != wireVarint {
				return fmt.Errorf("proto: wrong wireType = %d for field Rejected", wt)
			}
			var v uint64
			if v, pos, err = consumeVarint(b, p); err != nil {
				return err
			}
			ps.Rejected = int64(v)
		case 2:
			if wt != wireLen {
				return fmt.Errorf("proto: wrong wireType = %d for field ErrorMessage", wt)
			}
			start, end, err := consumeLen(b, p)
			if err != nil {
				return err
			}
			ps.ErrorMessage = string(b[start:end])
			pos = end
		default:
			if pos, err = consumeUnknown(b, p, wt); err != nil {
				return err
			}
		}
	}
	return nil
}

// ParseResponseJSON reads an OTLP/JSON export response as pdata's
// ExportResponse.UnmarshalJSON does, with the same JSON reader
// (json-iterator, pdata's configuration): both spellings of each field,
// the count as a number or a decimal string, unknown fields skipped.
func ParseResponseJSON(b []byte, sig Signal) (PartialSuccess, error) {
	iter := jsoniter.ConfigFastest.BorrowIterator(b)
	defer jsoniter.ConfigFastest.ReturnIterator(iter)
	var ps PartialSuccess
	for f := iter.ReadObject(); f != ""; f = iter.ReadObject() {
		switch f {
		case "partialSuccess", "partial_success":
			readPartialSuccessJSON(iter, sig, &ps)
		default:
			iter.Skip()
		}
	}
	return ps, iter.Error
}

func readPartialSuccessJSON(iter *jsoniter.Iterator, sig Signal, ps *PartialSuccess) {
	camel, snake := "rejectedSpans", "rejected_spans"
	if sig == Logs {
		camel, snake = "rejectedLogRecords", "rejected_log_records"
	}
	for f := iter.ReadObject(); f != ""; f = iter.ReadObject() {
		switch f {
		case camel, snake:
			ps.Rejected = readInt64(iter)
		case "errorMessage", "error_message":
			ps.ErrorMessage = iter.ReadString()
		default:
			iter.Skip()
		}
	}
}

// readInt64 is pdata's Iterator.ReadInt64: a number, or a decimal string.
func readInt64(iter *jsoniter.Iterator) int64 {
	switch iter.WhatIsNext() {
	case jsoniter.NumberValue:
		return iter.ReadInt64()
	case jsoniter.StringValue:
		v, err := strconv.ParseInt(iter.ReadString(), 10, 64)
		if err != nil {
			iter.ReportError("ReadInt64", err.Error())
			return 0
		}
		return v
	default:
		iter.ReportError("ReadInt64", "unsupported value type")
		return 0
	}
}
