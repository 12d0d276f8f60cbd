package evalengine

import "github.com/fadcedab/adk/evalengine/internal/evalcore"

// Internals the external tests check.
var (
	EncodedSize = evalcore.EncodedSize
	ResultSize  = evalcore.ResultSize

	SpliceSamples = evalcore.SpliceSamples

	IsScenarioCase = isScenarioCase
)
