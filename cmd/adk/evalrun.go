package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"math"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/agent"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/evalengine/agentadapter"
	"github.com/fadcedab/adk/evalengine/httpadapter"
	"github.com/fadcedab/adk/observability"
)

// evalRunFlags are the raw flag values of `adk eval run`. Numbers and
// booleans are taken as strings so that a bad value gets the contract's
// typed error ({invalid_positive_integer, samples}) instead of a generic
// flag-parse message.
type evalRunFlags struct {
	config, agentURL, evalSet, criteria, baseline, tolerances, judgeConfig string
	format, output, suiteName                                              string

	samples, concurrency, sampleConcurrency, timeout, caseTimeout string
	passRate, samplePassRate, minSuccessful, maxReportBytes       string
	emptyCriteria, captureEvents, captureToolContent              string
	maxPassRateDrop                                               string
	traceDrain                                                    time.Duration
}

func newEvalRunCmd() *cobra.Command {
	f := &evalRunFlags{}
	cmd := &cobra.Command{
		Use:   "run (--config AGENT.json | --agent-url URL) --eval-set SET.json [flags]",
		Short: "Evaluate an agent on an eval set; exit 0 pass, 2 failed or regressed, 1 error",
		Long: `Run every case of the eval set through the agent (a fresh agent, runner and
session per case and sample), score it with the criteria, and print the report.
An agent written in any language can be evaluated over HTTP instead: with
--agent-url every turn is one POST of {case_id, sample_id, turn_id,
turn_index, input, session_id}, answered by {output, events?, metadata?}
(see examples/http-agent/README.md).

Exit codes: 0 the evaluation passed (and did not regress against --baseline),
2 it completed but failed its thresholds or regressed, 1 any error (one line
on stderr). With --output PATH the report is also written atomically to PATH;
stdout and the file hold the same bytes. On a terminal, progress is drawn on
stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "agent config (AGENT.json, at most 1 MiB)")
	fl.StringVar(&f.agentURL, "agent-url", "", "evaluate an HTTP agent at this http(s) URL instead of --config (one POST per turn)")
	fl.StringVar(&f.evalSet, "eval-set", "", "eval set: schema 2, schema 1, Google ADK .evalset.json or .test.json (at most 16 MiB)")
	fl.StringVar(&f.criteria, "criteria", "", `criteria file (default [{"id":"response","criterion":"exact_response"}])`)
	fl.StringVar(&f.judgeConfig, "judge-config", "", `this machine's LLM judge for llm_judge criteria (at most 1 MiB): {"provider": "gemini"|"openai", "model", "base_url", "api_key_env", "timeout_ms"}`)
	fl.StringVar(&f.baseline, "baseline", "", "baseline result JSON to compare against (at most 16 MiB)")
	fl.StringVar(&f.tolerances, "metric-tolerances", "", "per-metric allowed score drop, {metric_id: fraction} (needs --baseline)")
	fl.StringVar(&f.maxPassRateDrop, "max-pass-rate-drop", "", "allowed pass-rate drop against the baseline, 0..1 (needs --baseline; default 0)")
	fl.StringVar(&f.format, "format", evalengine.FormatJSON, "report format: json, markdown, junit, sarif, annotations, html")
	fl.StringVar(&f.output, "output", "-", "also write the report atomically to this file (- for stdout only)")
	fl.StringVar(&f.suiteName, "suite-name", "", "suite/tool name in JUnit and SARIF (default adk_eval)")
	fl.StringVar(&f.samples, "samples", "", "samples per case, 1..100 (default 1)")
	fl.StringVar(&f.concurrency, "concurrency", "", "samples in flight, 1..256 (default 1)")
	fl.StringVar(&f.sampleConcurrency, "sample-concurrency", "", "samples of one case in flight, 1..256 (default --concurrency)")
	fl.StringVar(&f.timeout, "timeout", "", "whole-run timeout in ms (default 60000)")
	fl.StringVar(&f.caseTimeout, "case-timeout", "", "per-sample timeout in ms (default 30000)")
	fl.StringVar(&f.passRate, "pass-rate-threshold", "", "share of cases that must pass, 0..1 (default 1)")
	fl.StringVar(&f.samplePassRate, "sample-pass-rate-threshold", "", "share of a case's samples that must pass, 0..1 (default 1)")
	fl.StringVar(&f.minSuccessful, "min-successful-samples", "", "samples of a case that must finish without error (default --samples)")
	fl.StringVar(&f.emptyCriteria, "empty-criteria", "", "an empty criteria list is an error or passes: error|pass (default error)")
	fl.StringVar(&f.captureEvents, "capture-events", "", "keep agent events in the result: true|false (default true)")
	fl.StringVar(&f.captureToolContent, "capture-tool-content", "", "keep tool args and results in trajectories: true|false (default false)")
	fl.StringVar(&f.maxReportBytes, "max-report-bytes", "", "report size ceiling in bytes (default and maximum 16 MiB)")
	fl.DurationVar(&f.traceDrain, "trace-drain", defaultTraceDrain, "at exit, wait at most this long for traces to reach ADK_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_* (1ms..5m)")
	return cmd
}

// optionName is the contract's name of a flag (--case-timeout ⇒ case_timeout).
func optionName(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

func parsePositive(flag, v string, dst *int) error {
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return &cliError{Code: codeInvalidPositiveInt, Reason: optionName(flag)}
	}
	*dst = n
	return nil
}

func parseFraction(flag, v string, dst *float64) error {
	if v == "" {
		return nil
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(x) || x < 0 || x > 1 {
		return &cliError{Code: codeInvalidFraction, Reason: optionName(flag)}
	}
	*dst = x
	return nil
}

func parseBool(flag, v string, dst *bool) error {
	switch v {
	case "":
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return &cliError{Code: codeInvalidBoolean, Reason: optionName(flag)}
	}
	return nil
}

// options turns the flags into checked run options.
func (f *evalRunFlags) options() (evalengine.Options, error) {
	o := evalengine.DefaultOptions()
	for _, p := range []struct {
		flag, v string
		dst     *int
	}{
		{"samples", f.samples, &o.Samples},
		{"concurrency", f.concurrency, &o.Concurrency},
		{"sample-concurrency", f.sampleConcurrency, &o.SampleConcurrency},
		{"timeout", f.timeout, &o.TimeoutMS},
		{"case-timeout", f.caseTimeout, &o.CaseTimeoutMS},
		{"min-successful-samples", f.minSuccessful, &o.MinSuccessfulSamples},
		{"max-report-bytes", f.maxReportBytes, &o.MaxReportBytes},
	} {
		if err := parsePositive(p.flag, p.v, p.dst); err != nil {
			return o, err
		}
	}
	if err := parseFraction("pass-rate-threshold", f.passRate, &o.PassRateThreshold); err != nil {
		return o, err
	}
	if err := parseFraction("sample-pass-rate-threshold", f.samplePassRate, &o.SamplePassRateThreshold); err != nil {
		return o, err
	}
	switch f.emptyCriteria {
	case "":
	case evalengine.EmptyCriteriaError, evalengine.EmptyCriteriaPass:
		o.EmptyCriteria = f.emptyCriteria
	default:
		return o, &cliError{Code: codeInvalidEmptyCriteria, Reason: "empty_criteria"}
	}
	if err := parseBool("capture-events", f.captureEvents, &o.CaptureEvents); err != nil {
		return o, err
	}
	if err := parseBool("capture-tool-content", f.captureToolContent, &o.CaptureToolContent); err != nil {
		return o, err
	}
	n, err := o.Normalize()
	if err != nil {
		var ee *evalengine.Error
		if errors.As(err, &ee) {
			return o, &cliError{Code: ee.Code, Reason: ee.Detail, Err: err}
		}
		return o, engineError("", err)
	}
	return n, nil
}

// checkFormat validates a report format name.
func checkFormat(format string) error {
	if !slices.Contains(evalengine.Formats(), format) {
		return &cliError{Code: evalengine.CodeInvalidReportFormat}
	}
	return nil
}

// runEval is `adk eval run`.
func runEval(cmd *cobra.Command, f *evalRunFlags) (err error) {
	var missing []string
	if f.config == "" && f.agentURL == "" {
		missing = append(missing, "config")
	}
	if f.config != "" && f.agentURL != "" {
		return &cliError{Code: codeConflictingOptions, Reason: "config,agent_url"}
	}
	if f.evalSet == "" {
		missing = append(missing, "eval_set")
	}
	if len(missing) > 0 {
		return &cliError{Code: codeMissingRequired, Reason: strings.Join(missing, ",")}
	}
	opts, cmpOpts, err := f.validate()
	if err != nil {
		return err
	}

	// The agent config comes first: from here on, every error message is
	// scrubbed of the secrets its api_key_env variables hold.
	var cfgData []byte
	var secrets []string
	if f.config != "" {
		if cfgData, err = readCapped("config", f.config, maxConfigFileBytes); err != nil {
			return err
		}
		secrets = configSecrets(cfgData)
	}
	defer func() { err = redact(err, secrets) }()
	var judge *evalengine.ModelEnv
	if f.judgeConfig != "" {
		if judge, err = loadJudgeConfig(f.judgeConfig); err != nil {
			return err
		}
		secrets = append(secrets, judgeSecrets(judge)...)
	}

	set, _, err := loadEvalSetFormat(f.evalSet)
	if err != nil {
		return err
	}
	metrics := evalengine.DefaultCriteria()
	if f.criteria != "" {
		data, err := readCapped("criteria", f.criteria, maxConfigFileBytes)
		if err != nil {
			return err
		}
		if metrics, err = evalengine.ParseCriteriaWithOptions(data, evalengine.CriteriaOptions{Judge: judge}); err != nil {
			return engineError("", err)
		}
	}
	baseline, err := f.loadBaseline(&cmpOpts)
	if err != nil {
		return err
	}
	tracing, err := startLocalTracing(os.Getenv, "adk-eval", f.traceDrain)
	if err != nil {
		return err
	}
	defer tracing.finish(cmd.ErrOrStderr())
	adapter, err := f.adapter(cfgData, opts, tracing.tracer)
	if err != nil {
		return err
	}

	stopProfiles, err := startProfiles()
	if err != nil {
		return err
	}
	defer func() {
		if perr := stopProfiles(); err == nil {
			err = perr
		}
	}()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rc := evalengine.RunConfig{Adapter: adapter, Metrics: metrics, Options: opts, Observer: tracing.tracer}
	if p := newProgress(cmd.ErrOrStderr()); p != nil {
		rc.Progress = p.update
		p.begin(len(set.Cases) * opts.Samples)
		defer p.end()
	}
	result, err := evalengine.Run(ctx, set, rc)
	if err != nil {
		return engineError(codeEvaluationFailed, err)
	}
	return f.report(cmd, result, baseline, cmpOpts, opts, secrets)
}

// validate checks the flags every `eval run` checks before reading a file,
// local or on a cluster: format, output path, run options, and the
// comparison options (which need --baseline).
func (f *evalRunFlags) validate() (evalengine.Options, evalengine.CompareOptions, error) {
	var cmpOpts evalengine.CompareOptions
	if err := checkFormat(f.format); err != nil {
		return evalengine.Options{}, cmpOpts, err
	}
	if err := checkOutputPath(f.output); err != nil {
		return evalengine.Options{}, cmpOpts, err
	}
	opts, err := f.options()
	if err != nil {
		return evalengine.Options{}, cmpOpts, err
	}
	if err := parseFraction("max-pass-rate-drop", f.maxPassRateDrop, &cmpOpts.MaxPassRateDrop); err != nil {
		return evalengine.Options{}, cmpOpts, err
	}
	if f.baseline == "" && (f.maxPassRateDrop != "" || f.tolerances != "") {
		return evalengine.Options{}, cmpOpts, &cliError{Code: codeBaselineRequired}
	}
	return opts, cmpOpts, nil
}

// loadBaseline reads --metric-tolerances into cmpOpts and --baseline, if
// given (nil otherwise).
func (f *evalRunFlags) loadBaseline(cmpOpts *evalengine.CompareOptions) (*evalengine.Result, error) {
	if f.tolerances != "" {
		t, err := loadTolerances(f.tolerances)
		if err != nil {
			return nil, err
		}
		cmpOpts.MetricTolerances = t
	}
	if f.baseline == "" {
		return nil, nil
	}
	return loadBaseline(f.baseline)
}

// report renders the run's report (the comparison for json/markdown when a
// baseline is given), writes it, and turns the verdict into the exit code:
// the baseline gate is ANDed with the result's own verdict.
func (f *evalRunFlags) report(cmd *cobra.Command, result, baseline *evalengine.Result, cmpOpts evalengine.CompareOptions, opts evalengine.Options, secrets []string) error {
	passed := result.Passed
	var report any = result
	var cmp *evalengine.Comparison
	if baseline != nil {
		var err error
		cmp, err = evalengine.Compare(baseline, result, cmpOpts)
		if err != nil {
			return engineError(codeComparisonFailed, err)
		}
		passed = passed && cmp.Passed
		if f.format == evalengine.FormatJSON || f.format == evalengine.FormatMarkdown {
			report = cmp
		}
	}
	exportOpts := evalengine.ExportOptions{SuiteName: f.suiteName, MaxBytes: opts.MaxReportBytes}
	var data []byte
	var err error
	if f.format == evalengine.FormatHTML {
		// The HTML report is the job page: the result and, with a
		// baseline, its comparison in one file.
		data, err = evalengine.RenderHTML(result, cmp, exportOpts)
	} else {
		data, err = evalengine.Render(report, f.format, exportOpts)
	}
	if err != nil {
		return engineError(codeReportRenderFailed, err)
	}
	// The engine prunes and redacts what it records; this is the last
	// line: no credential the machine holds leaves in a report.
	data = scrubReport(data, secrets)
	if err := emitReport(cmd.OutOrStdout(), f.output, data); err != nil {
		return err
	}
	if !passed {
		return &exitCodeError{Code: exitFailed}
	}
	return nil
}

// loadBaseline reads a saved result (schema 2) to compare against.
func loadBaseline(path string) (*evalengine.Result, error) {
	data, err := readCapped("baseline", path, maxSetFileBytes)
	if err != nil {
		return nil, err
	}
	r, err := evalengine.DecodeResult(data)
	if err != nil {
		if evalengine.ErrorReason(err) == "not_an_object" {
			return nil, &cliError{Code: codeBaselineMustBeObject}
		}
		return nil, engineError(codeInvalidBaseline, err)
	}
	return r, nil
}

// adapter builds the agent under evaluation: the AGENT.json agent (a fresh
// runtime per sample) or, with --agent-url, the HTTP adapter.
func (f *evalRunFlags) adapter(cfgData []byte, opts evalengine.Options, obs observability.Observer) (evalengine.Adapter, error) {
	if f.agentURL != "" {
		u, err := url.Parse(f.agentURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			// The URL itself is not echoed: it may carry a token.
			return nil, &cliError{Code: codeInvalidAgentURL, Reason: "http_or_https_url_without_credentials"}
		}
		a, err := httpadapter.New(httpadapter.Config{URL: f.agentURL})
		if err != nil {
			return nil, &cliError{Code: codeInvalidAgentURL, Err: err}
		}
		return a, nil
	}
	cfg, err := agent.ParseConfig(cfgData)
	if err != nil {
		return nil, agentConfigError(err)
	}
	a, err := agentadapter.New(cfg, agentadapter.Options{CaptureEvents: opts.CaptureEvents, Build: agent.BuildOptions{Observer: obs}})
	if err != nil {
		return nil, &cliError{Code: codeInvalidAgentConfig, Err: err}
	}
	return a, nil
}

// agentConfigError reports a bad AGENT.json as {invalid_agent_config,
// runtime code} with the runtime's detail (which names keys and agents,
// never credential values).
func agentConfigError(err error) error {
	var ae *agent.Error
	if errors.As(err, &ae) {
		msg := strings.TrimPrefix(err.Error(), "agent: ")
		if ae.Code == agent.CodeInvalidAgentConfig {
			msg = strings.TrimPrefix(msg, ae.Code+": ")
			return &cliError{Code: codeInvalidAgentConfig, Detail: msg, Err: err}
		}
		return &cliError{Code: codeInvalidAgentConfig, Reason: ae.Code, Detail: strings.TrimPrefix(msg, ae.Code+": "), Err: err}
	}
	return &cliError{Code: codeInvalidAgentConfig, Detail: err.Error(), Err: err}
}

// configSecrets returns the values of the environment variables an agent
// config names as credentials (every "*_env" key, e.g. api_key_env), so
// error output can be scrubbed of them whatever a lower layer printed.
func configSecrets(data []byte) []string {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if name, ok := e.(string); ok && strings.HasSuffix(k, "_env") {
					if s := os.Getenv(name); len(s) >= 4 {
						out = append(out, s)
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// redactedError keeps an error's exit code while replacing its text.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// scrubReport replaces every secret in rendered report bytes. It copies
// only when one is present.
// htmlTextTemplate writes a string the way the HTML report's text does.
var htmlTextTemplate = template.Must(template.New("text").Parse("{{.}}"))

// htmlText is s as html/template writes it in text (it escapes more than
// template.HTMLEscapeString: + and NUL too).
func htmlText(s string) string {
	var b strings.Builder
	if err := htmlTextTemplate.Execute(&b, s); err != nil {
		return s
	}
	return b.String()
}

func scrubReport(data []byte, secrets []string) []byte {
	for _, s := range secrets {
		// An HTML report holds a secret's escaped spelling (+, &, < and
		// quotes are entities there), so that is scrubbed too.
		if e := htmlText(s); e != s && bytes.Contains(data, []byte(e)) {
			data = bytes.ReplaceAll(data, []byte(e), []byte("[REDACTED]"))
		}
		if bytes.Contains(data, []byte(s)) {
			data = bytes.ReplaceAll(data, []byte(s), []byte("[REDACTED]"))
		}
	}
	return data
}

func redact(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		clean = strings.ReplaceAll(clean, s, "[REDACTED]")
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}
