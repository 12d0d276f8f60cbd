// Package jsonquote writes a Go string as a JSON string, byte for byte as
// encoding/json does, without reflection or allocation: the one quoter of
// the hand-written encoders that must match encoding/json (span and
// envelope records, stored trace records, OpenAI chat requests).
//
// It must not import any adk package outside internal.
package jsonquote
