package evalcore

import "github.com/fadcedab/adk/internal/canonjson"

// ResultSize is the run's size check, for the root package's tests (its
// export_test.go), which own the result fixtures. Nothing else calls it.
var ResultSize = resultSize

// SpliceSamples renders r as the JSON report does after Run: every
// sample encoded on its own beforehand (CanonicalResult). ok is false
// when it fell back.
func SpliceSamples(r *Result) (out []byte, ok bool, err error) {
	r.sampleJSON = make([][][]byte, len(r.Cases))
	for ci := range r.Cases {
		r.sampleJSON[ci] = make([][]byte, len(r.Cases[ci].Samples))
		for si := range r.Cases[ci].Samples {
			if r.sampleJSON[ci][si], err = canonjson.Marshal(&r.Cases[ci].Samples[si]); err != nil {
				return nil, false, err
			}
		}
	}
	defer func() { r.sampleJSON = nil }()
	return CanonicalResult(r)
}

// TrajectoryKey and TrajectoriesEqual are the comparison's trajectory
// digest and the equality it stands for, for the root package's tests.
var TrajectoryKey = trajectoryKey

// TrajectoriesEqual is jsonEqual of the trajectories' generic forms.
func TrajectoriesEqual(a, b []TrajectoryItem) bool {
	ga, err1 := ToGeneric(a)
	gb, err2 := ToGeneric(b)
	return err1 == nil && err2 == nil && jsonEqual(ga, gb)
}
