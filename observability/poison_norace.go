//go:build !race

package observability

const poisonFreedRecords = false
