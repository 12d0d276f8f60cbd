// Package jsonquote writes a Go string as a JSON string, byte for byte as
// the encoder it stands in for does, without reflection or allocation:
// the one quoter of the hand-written encoders. HTML and Plain are
// encoding/json's two forms (span and envelope records and OpenAI chat
// requests; stored trace records), Iter is json-iterator's (the OTLP
// export response, as pdata writes it).
//
// It must not import any adk package outside internal.
package jsonquote
