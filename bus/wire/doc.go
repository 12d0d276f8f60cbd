// Package wire is the versioned, bounded msgpack codec every NATS payload
// uses: Encode wraps a body in an envelope [version, kind, body]; Decode
// checks size, scans the bytes with a bounded, non-recursive scanner
// (depth, element count, declared lengths against the bytes left) and only
// then lets msgpack decode the body. See ../DESIGN.md.
//
// wire is a leaf: it imports msgpack and nothing from adk, so it never
// links nats-server.
package wire
