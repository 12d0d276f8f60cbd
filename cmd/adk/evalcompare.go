package main

import (
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/evalengine"
)

// CLI error codes of compare and stats.
const (
	codeInvalidResult          = evalengine.CodeInvalidEvalResult
	codeInvalidCurrentResult   = evalengine.CodeInvalidCurrentResult
	codeInvalidConfidenceLevel = "invalid_confidence_level"
	codeStatisticsFailed       = "evaluation_statistics_failed"
)

// evalCompareFlags are the raw flag values of `adk eval compare`.
type evalCompareFlags struct {
	format, output, suiteName, tolerances string
	maxPassRateDrop                       float64
	maxReportBytes                        int
}

func newEvalCompareCmd() *cobra.Command {
	f := &evalCompareFlags{}
	cmd := &cobra.Command{
		Use:   "compare BASELINE CURRENT",
		Short: "Compare two saved results; exit 0 no regression and current passed, 2 otherwise, 1 error",
		Long: `Compare a current result (adk eval run --format json) with a baseline result,
offline, as adk eval run --baseline does. Either may be a JSON Lines result
(--format jsonl, or the FILE.jsonl a run over one document keeps) of any
size: only its case lines and summary are read. json prints the canonical
comparison document; markdown adds both results' 95% Wilson pass-rate
intervals. The report is written a case row at a time: past
--max-report-bytes (a comparison has a row per baseline case) it is the
same document, whole, and stderr says so. Exit 0 when the current result passed and did not regress, 2
when it failed or regressed, 1 on any error. With --output PATH the report
is also written atomically to PATH; stdout and the file hold the same bytes.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEvalCompare(cmd, f, args[0], args[1])
		},
	}
	fl := cmd.Flags()
	choiceFlag(cmd, &f.format, "format", evalengine.CodeInvalidReportFormat, evalengine.FormatMarkdown, "report format",
		[]string{evalengine.FormatJSON, evalengine.FormatMarkdown})
	fl.StringVar(&f.output, "output", "-", "also write the report atomically to this file (- for stdout only)")
	fl.StringVar(&f.tolerances, "metric-tolerances", "", "per-metric allowed score drop, {metric_id: fraction}")
	fl.Var(&fractionValue{dst: &f.maxPassRateDrop, name: "max-pass-rate-drop"}, "max-pass-rate-drop", "allowed pass-rate drop, 0..1")
	fl.StringVar(&f.suiteName, "suite-name", "", "suite name of the report (default adk_eval)")
	fl.Var(&posIntValue{dst: &f.maxReportBytes, name: "max-report-bytes", valid: "1..16777216"}, "max-report-bytes", "one document's bound in bytes (default and maximum 16 MiB); a comparison over it is written whole, a row at a time (stderr says so)")
	return cmd
}

func runEvalCompare(cmd *cobra.Command, f *evalCompareFlags, baselinePath, currentPath string) error {
	if err := checkOutputPath(f.output); err != nil {
		return err
	}
	opts := evalengine.CompareOptions{MaxPassRateDrop: f.maxPassRateDrop}
	maxBytes := f.maxReportBytes
	if f.tolerances != "" {
		t, err := loadTolerances(f.tolerances)
		if err != nil {
			return err
		}
		opts.MetricTolerances = t
	}
	// Either side may be a JSON Lines result of any size (evalbaseline.go).
	baseline, err := loadSide("baseline", baselinePath, codeInvalidBaseline)
	if err != nil {
		return err
	}
	current, err := loadSide("current", currentPath, codeInvalidCurrentResult)
	if err != nil {
		return err
	}
	cmp, err := evalengine.CompareSides(baseline, current, opts)
	if err != nil {
		return engineError(codeComparisonFailed, err)
	}
	// Written a case row at a time: the one document's bytes, or past
	// --max-report-bytes the same document whole (evalbaseline.go).
	eo := evalengine.ExportOptions{SuiteName: f.suiteName, MaxBytes: maxBytes}
	err = emitComparison(cmd, f.output, maxBytes, codeComparisonFailed, nil, func(w io.Writer) (int64, error) {
		return evalengine.WriteCompareSidesReport(w, baseline, current, cmp, f.format, eo)
	})
	if err != nil {
		return err
	}
	if !cmp.Passed || !current.Summary().Passed {
		return &exitCodeError{Code: exitFailed}
	}
	return nil
}

// evalStatsFlags are the raw flag values of `adk eval stats`.
type evalStatsFlags struct {
	confidence          string
	maxMeanDrop         float64
	requireSignificance bool
	format, output      string
	maxReportBytes      int
}

func newEvalStatsCmd() *cobra.Command {
	f := &evalStatsFlags{}
	cmd := &cobra.Command{
		Use:   "stats RESULT.json...",
		Short: "Confidence intervals of saved results and the longitudinal gate; exit 0 pass, 2 regression, 1 error",
		Long: `Print, for every result (oldest first; all of the same eval set), the Wilson
interval of its pass rate and the confidence interval of each metric's mean
score. With two or more results, the last one is gated against all earlier
ones pooled, on case outcomes and on every metric: exit 2 when it regressed,
0 when it did not, 1 on any error.

A RESULT may be a JSON Lines result (--format jsonl, or the FILE.jsonl a
run over one document keeps) of any size: it is read once, keeping its
scores (8 bytes an ok score), never a sample, and its statistics are those
of the same result as one document.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("%s needs at least one RESULT.json", cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEvalStats(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.confidence, "confidence", "", "confidence level of every interval and the gate: 0.90, 0.95 or 0.99 (default 0.95)")
	_ = cmd.RegisterFlagCompletionFunc("confidence", cobra.FixedCompletions([]string{"0.90", "0.95", "0.99"}, cobra.ShellCompDirectiveNoFileComp))
	fl.Var(&fractionValue{dst: &f.maxMeanDrop, name: "max-mean-drop"}, "max-mean-drop", "tolerated fall of the pass rate or a metric's mean, 0..1")
	f.requireSignificance = evalengine.DefaultStatsOptions().Gate.RequireSignificance
	f.maxMeanDrop = evalengine.DefaultStatsOptions().Gate.MaxMeanDrop
	boolFlag(fl, &f.requireSignificance, "require-significance", "fail only on a statistically significant drop")
	choiceFlag(cmd, &f.format, "format", evalengine.CodeInvalidReportFormat, evalengine.FormatText, "report format",
		[]string{evalengine.FormatText, evalengine.FormatMarkdown, evalengine.FormatJSON})
	fl.StringVar(&f.output, "output", "-", "also write the report atomically to this file (- for stdout only)")
	fl.Var(&posIntValue{dst: &f.maxReportBytes, name: "max-report-bytes", valid: "1..16777216"}, "max-report-bytes", "report size ceiling in bytes (default and maximum 16 MiB)")
	return cmd
}

func runEvalStats(cmd *cobra.Command, f *evalStatsFlags, paths []string) error {
	o := evalengine.DefaultStatsOptions()
	o.Format = f.format
	if err := checkOutputPath(f.output); err != nil {
		return err
	}
	if f.confidence != "" {
		x, err := strconv.ParseFloat(f.confidence, 64)
		if err != nil || math.IsNaN(x) {
			return &cliError{Code: codeInvalidConfidenceLevel, Detail: "0.90, 0.95 or 0.99"}
		}
		o.Gate.ConfidenceLevel = x
	}
	o.Gate.MaxMeanDrop = f.maxMeanDrop
	o.Gate.RequireSignificance = f.requireSignificance
	if f.maxReportBytes != 0 {
		o.MaxBytes = f.maxReportBytes
	}
	if len(paths) > evalengine.MaxStatsReportInputs {
		return &cliError{Code: evalengine.CodeInvalidEvaluationStatistic, Reason: "result_count", Detail: strconv.Itoa(len(paths))}
	}
	b, err := evalengine.NewStatsBuilder(len(paths), o)
	if err != nil {
		return statsError(err)
	}
	// One result at a time: a document, or a JSON Lines result of any
	// size read once into its statistics series (scores, never samples).
	for _, p := range paths {
		if isStreamFile(p) {
			s, err := streamSeriesOf(p)
			if err != nil {
				return err
			}
			err = b.Add(s)
			if err != nil {
				return statsError(err)
			}
			continue
		}
		r, err := loadResult("result", p, codeInvalidResult)
		if err != nil {
			return err
		}
		if err := b.AddResult(r); err != nil {
			return statsError(err)
		}
	}
	out, doc, err := b.Finish()
	if err != nil {
		return statsError(err)
	}
	if err := emitReport(reportWriter(cmd, f.output), f.output, out); err != nil {
		return err
	}
	if !doc.Passed {
		return &exitCodeError{Code: exitFailed}
	}
	return nil
}

// statsError is a failed `adk eval stats`.
func statsError(err error) error {
	if evalengine.ErrorCode(err) == evalengine.CodeInvalidConfidenceLevel {
		return &cliError{Code: codeInvalidConfidenceLevel, Detail: "0.90, 0.95 or 0.99", Err: err}
	}
	return engineError(codeStatisticsFailed, err)
}

// streamSeriesOf reads a JSON Lines result file's statistics series: one
// pass that checks it as a comparison side does (streamSideOf).
func streamSeriesOf(path string) (*evalengine.StatsSeries, error) {
	f, err := openRegularStream("result", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := evalengine.ReadStreamSeries(f)
	if err != nil {
		return nil, sideError(codeInvalidResult, path, err)
	}
	return s, nil
}

// loadResult reads a saved result document (at most 16 MiB, checked
// before it is read whole). A bad document is {wrap, engine reason}
// naming the file; wrap invalid_eval_result keeps the engine's code.
func loadResult(name, path, wrap string) (*evalengine.Result, error) {
	data, err := readCapped(name, path, maxSetFileBytes)
	if err != nil {
		return nil, err
	}
	r, err := evalengine.DecodeResult(data)
	if err != nil {
		code, reason := evalengine.ErrorCode(err), evalengine.ErrorReason(err)
		switch {
		case wrap == code:
		case reason == "":
			reason = code
		default:
			reason = code + ": " + reason
		}
		return nil, &cliError{Code: wrap, Reason: reason, Detail: path, Err: err}
	}
	return r, nil
}

// loadTolerances reads a {metric_id: fraction} file.
func loadTolerances(path string) (map[string]float64, error) {
	data, err := readCapped("metric_tolerances", path, maxConfigFileBytes)
	if err != nil {
		return nil, err
	}
	t, err := evalengine.ParseMetricTolerances(data)
	if err != nil {
		return nil, engineError("", err)
	}
	return t, nil
}
