// Package canonjson writes canonical JSON and its SHA-256 digest: the bytes
// behind eval-set revisions, result digests and deterministic reports, so
// equal values give equal bytes on every node and in every release.
//
// The form follows RFC 8785 (JCS): object keys sorted by UTF-16 code units,
// no insignificant whitespace, strings escaped minimally (only ", \ and
// control characters; no HTML escaping; U+2028 written raw), and
// floating-point numbers written like ECMAScript's Number.prototype.toString.
// One deliberate difference: an integer given as json.Number or a Go integer
// type is written with all its digits, so ids and counters above 2^53 keep
// their exact value where JCS would round them to a double.
//
// It must not import any adk package outside internal.
package canonjson
