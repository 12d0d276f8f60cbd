package evalengine

import (
	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/evalengine/internal/googleadk"
)

// Internals the external tests check.
var (
	EncodedSize = evalcore.EncodedSize
	ResultSize  = evalcore.ResultSize

	SpliceSamples = evalcore.SpliceSamples

	IsScenarioCase = googleadk.IsScenarioCase
)
