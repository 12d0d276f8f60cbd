package evalengine

import (
	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/evalengine/internal/googleadk"
)

// Internals the external tests check.
var (
	ResultSize = evalcore.ResultSize

	SpliceSamples = evalcore.SpliceSamples
	EncodeSample  = evalcore.EncodeSample

	IsScenarioCase = googleadk.IsScenarioCase

	TrajectoryKey     = evalcore.TrajectoryKey
	TrajectoriesEqual = evalcore.TrajectoriesEqual

	ScanTypesMirror   = evalcore.ScanTypesMirror
	ScanDecodersAgree = evalcore.ScanDecodersAgree
)
