package evalcore

// The run's size check, for the root package's tests (its export_test.go),
// which own the result fixtures. Nothing else calls these.
var (
	EncodedSize = encodedSize
	ResultSize  = resultSize
)
