package evalcore

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/internal/jsonlimit"
)

// ResultSize is the run's size check, for the root package's tests (its
// export_test.go), which own the result fixtures. Nothing else calls it.
var ResultSize = resultSize

// EncodeSample is the workers' sample encoding (sample_encode.go), for
// the root package's tests, which hold it to canonjson.Marshal.
var EncodeSample = encodeSample

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

// ScanTypesMirror checks that the stream checks' types (streamscan.go)
// are the result types field for field: the same names and JSON tags in
// the same order, every field either of the same type, or the scan
// type's stand-in for it (jsonValue for any, jsonObject for a map,
// jsonArray for a list of any or a case line's samples, jsonString for a
// *string), or a list of the mirrored element type. It returns what
// differs, "" when nothing does; the root package's tests call it.
func ScanTypesMirror() string {
	pairs := map[reflect.Type]reflect.Type{
		reflect.TypeFor[scanSample]():         reflect.TypeFor[SampleResult](),
		reflect.TypeFor[scanTurn]():           reflect.TypeFor[TurnResult](),
		reflect.TypeFor[scanTrajectoryItem](): reflect.TypeFor[TrajectoryItem](),
		reflect.TypeFor[scanMetric]():         reflect.TypeFor[MetricResult](),
		reflect.TypeFor[scanCase]():           reflect.TypeFor[CaseResult](),
		reflect.TypeFor[scanSampleLine]():     reflect.TypeFor[streamSample](),
		reflect.TypeFor[scanCaseLine]():       reflect.TypeFor[caseLine](),
	}
	standIn := map[reflect.Type][]reflect.Type{
		reflect.TypeFor[jsonValue]():  {reflect.TypeFor[any]()},
		reflect.TypeFor[jsonObject](): {reflect.TypeFor[map[string]any]()},
		reflect.TypeFor[jsonArray]():  {reflect.TypeFor[[]any](), reflect.TypeFor[[]SampleResult]()},
		reflect.TypeFor[jsonString](): {reflect.TypeFor[*string]()},
	}
	mirrors := func(scan, real reflect.Type) bool {
		if scan == real || slices.Contains(standIn[scan], real) {
			return true
		}
		switch {
		case scan.Kind() == reflect.Slice && real.Kind() == reflect.Slice:
			return pairs[scan.Elem()] == real.Elem()
		case scan.Kind() == reflect.Pointer && real.Kind() == reflect.Pointer:
			return pairs[scan.Elem()] == real.Elem()
		}
		return false
	}
	var diffs []string
	for scan, real := range pairs {
		if scan.NumField() != real.NumField() {
			diffs = append(diffs, scan.Name()+": field count")
			continue
		}
		for i := range scan.NumField() {
			a, b := scan.Field(i), real.Field(i)
			if a.Name != b.Name || a.Tag != b.Tag || !mirrors(a.Type, b.Type) {
				diffs = append(diffs, scan.Name()+"."+a.Name+" vs "+real.Name()+"."+b.Name)
			}
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}

// ScanDecodersAgree decodes line as a sample line and as a case line,
// under the stream's limits and under tighter ones that a fuzzer reaches
// (scanFuzzLimits), with jsonlimit.Check and then encoding/json into the
// scan types (jsonlimit.Unmarshal) and with the one-pass scan decoder
// (lineDecoder, one reused for every decode), and returns how they
// differ: Check's error, the verdict or the value; "" when they agree.
// The root package's fuzz target calls it.
func ScanDecodersAgree(line []byte) string {
	stream := jsonlimit.OwnDocumentLimits()
	stream.MaxBytes = MaxStreamLineBytes
	var dec lineDecoder
	for _, lim := range []jsonlimit.Limits{stream, scanFuzzLimits} {
		cerr := jsonlimit.Check(line, lim)
		for _, pair := range [][2]any{{new(scanSampleLine), new(scanSampleLine)}, {new(scanCaseLine), new(scanCaseLine)}} {
			got := dec.decode(line, lim, pair[1])
			if cerr != nil {
				if !reflect.DeepEqual(got, cerr) {
					return fmt.Sprintf("%T under %+v: jsonlimit.Check %v, scan decoder %v", pair[0], lim, cerr, got)
				}
				continue
			}
			want := jsonlimit.Unmarshal(line, lim, pair[0])
			if (want == nil) != (got == nil) || got != nil && got != errScanLine {
				return fmt.Sprintf("%T under %+v: encoding/json %v, scan decoder %v", pair[0], lim, want, got)
			}
			if want == nil && !reflect.DeepEqual(pair[0], pair[1]) {
				return fmt.Sprintf("%T: encoding/json %+v, scan decoder %+v", pair[0], pair[0], pair[1])
			}
		}
	}
	return ""
}

// scanFuzzLimits are the stream's limits tightened to sizes a golden
// sample or case line comes close to, so that mutations of it cross each
// one.
var scanFuzzLimits = jsonlimit.Limits{MaxDepth: 6, MaxNodes: 160, MaxString: 48, MaxStringTotal: 1200, MaxList: 4, MaxObjectKeys: 16, MaxBytes: 4096}
