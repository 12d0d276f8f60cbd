package evalengine

// Internals the external tests check.
var (
	EncodedSize = encodedSize
	ResultSize  = resultSize

	IsScenarioCase = isScenarioCase
)
