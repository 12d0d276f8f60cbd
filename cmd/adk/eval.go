package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/evalengine"
)

// newEvalCmdFor builds `adk eval`, which groups the evaluation commands,
// local and on a cluster, with the subcommands args can reach
// (newRootCmdFor).
func newEvalCmdFor(args []string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Evaluate agents: adk eval run, validate, convert, report, compare, stats",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("adk eval needs a subcommand: run, validate, convert, report, compare or stats")}
		},
	}
	addSubcommands(cmd, args,
		subcommand{name: "run", build: newEvalRunCmd}, subcommand{name: "validate", build: newEvalValidateCmd},
		subcommand{name: "convert", build: newEvalConvertCmd}, subcommand{name: "report", build: newEvalReportCmd},
		subcommand{name: "compare", build: newEvalCompareCmd}, subcommand{name: "stats", build: newEvalStatsCmd},
		// On a cluster (eval_cluster.go, eval_admin.go).
		subcommand{name: "submit", build: newEvalSubmitCmd}, subcommand{name: "status", build: newEvalStatusCmd},
		subcommand{name: "result", build: newEvalResultCmd}, subcommand{name: "cancel", build: newEvalCancelCmd},
		subcommand{name: "jobs", build: newEvalJobsCmd},
		subcommand{name: "baselines", build: newEvalBaselinesCmd}, subcommand{name: "sets", build: newEvalSetsCmd},
		subcommand{name: "prune", build: newEvalPruneCmd})
	return cmd
}

func newEvalValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate SET.json",
		Short: "Check an eval set (any supported format) without running it",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, format, err := loadEvalSetFormat(args[0])
			if err != nil {
				return err
			}
			turns := 0
			for i := range set.Cases {
				turns += len(set.Cases[i].Turns)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "ok: eval set %q version %q (%s, schema %d): %d cases, %d turns\n",
				set.ID, set.Version, format, set.SchemaVersion, len(set.Cases), turns)
			return err
		},
	}
}

func newEvalConvertCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "convert IN OUT|-",
		Short: "Convert a Google ADK eval set (or a schema-1 set) to canonical schema 2",
		Long: `Read an eval set in any supported format (Google ADK .evalset.json or
.test.json, schema 1 or 2) and write it as a canonical schema-2 document,
atomically to OUT, or to stdout with -.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := args[1]
			if err := checkOutputPath(out); err != nil {
				return err
			}
			set, _, err := loadEvalSetFormat(args[0])
			if err != nil {
				return err
			}
			data, err := evalengine.EncodeSet(set)
			if err != nil {
				return engineError(evalengine.CodeInvalidEvalSet, err)
			}
			if out == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			return writeAtomic(out, data)
		},
	}
}

func newEvalReportCmd() *cobra.Command {
	var format, output, suite, apiURL string
	maxBytes := evalengine.MaxExportBytes
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   "report (RESULT.json | JOB_ID [--nats URL] | JOB_ID --url API_URL)",
		Short: "Render a saved result, a baseline comparison or a cluster job's result",
		Long: `Render a result document (adk eval run --format json) or a baseline
comparison in another format. The document is re-validated strictly first.
JUnit, SARIF and annotations need a result, not a comparison.

A JSON Lines result (adk eval run --format jsonl) of any size renders in
bounded memory: markdown, junit, sarif and annotations case by case; html
as one page of at most --max-report-bytes (16 MiB), all of it when it
fits, else the failed cases first under a note saying how many it shows.
json of a jsonl result over one document is the jsonl itself (stderr
says so). A baseline comparison (adk eval compare --format json) of any
size is read back a row at a time, each row checked strictly.

With --nats (or $ADK_CLUSTER set and no such file) the argument is a job id
and the cluster's stored result is rendered: markdown, junit and sarif of
any size from the job's jsonl stream, the other formats from its document,
or from the stream when the document is over 16 MiB. With --url the job's report
is fetched from the developer HTTP API instead (bearer token from
$ADK_DEV_TOKEN): the same bytes.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutputPath(output); err != nil {
				return err
			}
			if apiURL != "" {
				if cf.changed(cmd.Flags()) {
					return usageError{errors.New("--url and --nats are two ways to reach a job: give one")}
				}
				return reportOverHTTP(cmd, apiURL, cf.scope, cmd.Flags().Changed("scope"), args[0], format, output, suite)
			}
			if err := checkReportBytes(maxBytes); err != nil {
				return err
			}
			var v any
			if cf.changed(cmd.Flags()) || (cf.url != "" && !fileExists(args[0])) {
				if slices.Contains(caseByCaseFormats, format) {
					// Any size: the job's stream, rendered case by case.
					return reportClusterStream(cmd, &cf, args[0], format, output, suite, maxBytes)
				}
				r, err := clusterResult(cmd.Context(), &cf, args[0])
				if cliCode(err) == evalengine.CodeReportTooLarge {
					// Over one document: from the job's stream.
					return reportClusterStream(cmd, &cf, args[0], format, output, suite, maxBytes)
				}
				if err != nil {
					return err
				}
				v = r
			} else if isStreamFile(args[0]) {
				return reportStream(cmd, args[0], format, output, suite, maxBytes)
			} else if overOneDocument(args[0]) {
				// Only a comparison is one JSON document past the
				// bound (doc.go, 17.): read a row at a time.
				c, err := readComparisonFile(args[0])
				if err != nil {
					return err
				}
				v = c
			} else {
				data, err := readCapped("result", args[0], maxSetFileBytes)
				if err != nil {
					return err
				}
				if v, err = decodeReportInput(data); err != nil {
					return err
				}
			}
			eo := evalengine.ExportOptions{SuiteName: suite, MaxBytes: maxBytes}
			if c, ok := v.(*evalengine.Comparison); ok && (format == evalengine.FormatJSON || format == evalengine.FormatMarkdown) {
				// A case row at a time: whole even past the bound.
				return emitComparison(cmd, output, maxBytes, codeReportRenderFailed, nil, func(w io.Writer) (int64, error) {
					return evalengine.WriteComparison(w, c, format, eo)
				})
			}
			rendered, err := evalengine.Render(v, format, eo)
			if c, ok := v.(*evalengine.Comparison); ok && format == evalengine.FormatHTML && evalengine.ErrorCode(err) == evalengine.CodeExportByteLimitExceeded {
				// One page: the regressions first, as many rows as fit.
				if rendered, err = evalengine.RenderComparisonPage(c, eo); err != nil {
					return engineError(codeReportRenderFailed, err)
				}
				if err := emitReport(reportWriter(cmd, output), output, rendered); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "adk: the html comparison is over one %d-byte page: it shows the regressions first, as many rows as fit; its note says how many\n", maxBytes)
				return nil
			}
			if r, ok := v.(*evalengine.Result); ok && format != evalengine.FormatJSON && evalengine.ErrorCode(err) == evalengine.CodeExportByteLimitExceeded {
				// The result fits one document but this report of it does
				// not: case by case (html: one page).
				if err := renderOverBound(cmd, output, r, nil, format, eo, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "adk: the %s report is over one %d-byte document: it was rendered case by case%s\n", format, maxBytes, htmlPageNote(format))
				return nil
			}
			if err != nil {
				return engineError(codeReportRenderFailed, err)
			}
			return emitReport(reportWriter(cmd, output), output, rendered)
		},
	}
	registerReportFlags(cmd, &format, &output, &suite, evalengine.FormatMarkdown)
	cmd.Flags().Var(&posIntValue{dst: &maxBytes, name: "max-report-bytes", valid: "1..16777216"}, "max-report-bytes",
		"one document's bound in bytes (default and maximum 16 MiB): a jsonl result over it renders case by case, html as one page of at most this")
	cf.register(cmd)
	cmd.Flags().StringVar(&apiURL, "url", "", "fetch JOB_ID's report from this developer HTTP API, e.g. http://127.0.0.1:8080 (token from $"+envDevToken+")")
	return cmd
}

// clusterResult fetches a cluster job's result.
func clusterResult(ctx context.Context, cf *clusterFlags, jobID string) (*evalengine.Result, error) {
	cl, done, err := cf.client()
	if err != nil {
		return nil, err
	}
	defer done()
	j, err := cl.Status(ctx, cf.scope, jobID)
	if err != nil {
		return nil, serviceError(err)
	}
	return fetchResult(ctx, cl, cf.scope, j)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// decodeReportInput reads a result or, when the document says it is one, a
// baseline comparison.
// overOneDocument reports whether path is a regular file larger than a
// saved document (16 MiB).
func overOneDocument(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Size() > maxSetFileBytes
}

// readComparisonFile reads a comparison document past one document's
// bound, a row at a time.
func readComparisonFile(path string) (*evalengine.Comparison, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unreadable("result", path, err)
	}
	defer f.Close()
	c, err := evalengine.ReadComparison(f)
	if err != nil {
		return nil, sideError(codeInvalidEvalReportInput, path, err)
	}
	return c, nil
}

func decodeReportInput(data []byte) (any, error) {
	if bytes.Contains(data, []byte(`"report_type"`)) {
		if c, err := evalengine.DecodeComparison(data); err == nil {
			return c, nil
		}
	}
	r, err := evalengine.DecodeResult(data)
	if err != nil {
		return nil, engineError(codeInvalidEvalReportInput, err)
	}
	return r, nil
}

func loadEvalSetFormat(path string) (*evalengine.Set, evalengine.SetFormat, error) {
	data, err := readCapped("eval_set", path, maxSetFileBytes)
	if err != nil {
		return nil, "", err
	}
	set, format, err := evalengine.LoadSetWithOptions(data, evalengine.LoadOptions{SourceName: filepath.Base(path)})
	if err != nil {
		switch evalengine.ErrorCode(err) {
		case evalengine.CodeInvalidEvalSet, evalengine.CodeEvalSetMustBeObject:
			return nil, "", engineError("", err)
		}
		return nil, "", engineError(evalengine.CodeInvalidEvalSet, err)
	}
	return set, format, nil
}

// exactArgs is cobra.ExactArgs with a usage error (exit 1, one line).
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d", cmd.CommandPath(), n, len(args))}
		}
		return nil
	}
}
