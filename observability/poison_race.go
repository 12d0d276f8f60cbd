//go:build race

package observability

// Race-enabled builds (the tests under -race) fill a freed record chunk
// with poisonByte: a record read after its Release then shows as broken
// JSON in whatever encoded it, and the race detector sees the write.
const poisonFreedRecords = true
