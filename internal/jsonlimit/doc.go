// Package jsonlimit is the one bounded reader for untrusted JSON: eval sets,
// baselines, criteria files, API bodies and anything else a peer or a user
// hands us.
//
// It walks the input with its own scanner and counts nesting depth, nodes,
// string bytes, list length and object size as it goes, failing at the first
// violation with a typed *Error whose Code is the contract's stable string
// (eval_data_depth_exceeded, eval_list_too_large, ...). Nothing larger than a
// limit is ever allocated. The defaults are the contract's (DefaultLimits);
// callers may lower any limit but never raise one.
//
// Scanner is the same check driven a value at a time by a caller that
// decodes its own types as it goes, so that a document is scanned once
// rather than checked and then decoded; it enforces exactly what Check
// does, in the same order, with the same errors.
//
// Beyond the limits the reader is strict where encoding/json is lenient:
// duplicate object keys, invalid UTF-8, unpaired UTF-16 surrogate escapes and
// trailing data are all rejected, so that a document has exactly one meaning
// and one canonical digest.
//
// It must not import any adk package outside internal.
package jsonlimit
