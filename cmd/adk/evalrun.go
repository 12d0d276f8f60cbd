package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fadcedab/adk/agent"
	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/cmd/adk/internal/evalheap"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/evalengine/agentadapter"
	"github.com/fadcedab/adk/evalengine/httpadapter"
	"github.com/fadcedab/adk/evalengine/respcache"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/settings"
	"github.com/fadcedab/adk/store/evalrecord"
)

// CLI defaults of the run timeouts, sized for real providers: one sample
// of a multi-turn case against a hosted model with tool calls takes tens of
// seconds, and a rate-limited run of a few hundred samples takes tens of
// minutes. The library's defaults (evalengine.DefaultOptions, 60 s and
// 30 s) are the contract's and unchanged.
const (
	defaultRunTimeout  = time.Hour // evalengine.MaxTimeoutMS
	defaultCaseTimeout = 5 * time.Minute
)

// evalRunFlags are the flags of `adk eval run` (and, for the job-defining
// ones, `adk eval submit`). The typed flags write straight into opts.
type evalRunFlags struct {
	config, agentURL, agentName, evalSet, criteria, judgeConfig string
	userSimConfig, adkTestConfig                                string
	baseline, tolerances                                        string
	format, output, suiteName                                   string

	opts            evalengine.Options
	maxPassRateDrop float64
	cluster         clusterFlags
	traceDrain      time.Duration
	traceTo         string
	// settings is --settings: its log section says how --trace-to's
	// lost-signal warnings are logged (traceLog, traceWarnEvery).
	settings       string
	traceLog       *slog.Logger
	traceWarnEvery time.Duration

	// Local runs only: the resume journal and the response cache.
	resume, cache, cacheMode string
	// digests identify a local run's inputs (resume journal, jsonl header),
	// made by digestInputs when a run first needs them (fillDigests).
	digests      map[string]string
	digestInputs func() (map[string]string, error)
}

// fillDigests makes the run's input digests if it has none yet. A run
// that keeps no journal and writes no jsonl needs them only when its
// result passes one document and streams (evalspill.go): marshalling the
// eval set for them was ~0.3 ms of CPU before its first model call.
func (f *evalRunFlags) fillDigests() error {
	if f.digests != nil || f.digestInputs == nil {
		return nil
	}
	d, err := f.digestInputs()
	if err != nil {
		return err
	}
	f.digests = d
	return nil
}

func newEvalRunFlags() *evalRunFlags {
	f := &evalRunFlags{opts: evalengine.DefaultOptions()}
	f.opts.TimeoutMS = int(defaultRunTimeout.Milliseconds())
	f.opts.CaseTimeoutMS = int(defaultCaseTimeout.Milliseconds())
	return f
}

// registerJob registers the flags that define what runs and how it is
// judged; `eval run` and `eval submit` share them.
func (f *evalRunFlags) registerJob(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.agentName, "agent", "", "run on the cluster (--nats) with this agent, one its live workers offer")
	_ = cmd.RegisterFlagCompletionFunc("agent", f.cluster.completeAgents)
	fl.StringVar(&f.evalSet, "eval-set", "", "eval set: schema 2, schema 1, Google ADK .evalset.json or .test.json (at most 16 MiB)")
	fl.StringVar(&f.criteria, "criteria", "", `criteria file (default [{"id":"response","criterion":"exact_response"}])`)
	o := &f.opts
	fl.Var(&posIntValue{dst: &o.Samples, name: "samples", valid: "1..100"}, "samples", "samples per case, 1..100")
	fl.Var(&msDurationValue{dst: &o.TimeoutMS, name: "timeout", max: time.Hour}, "timeout", "whole-run timeout, e.g. 30m; a plain integer is milliseconds; at most 1h")
	fl.Var(&msDurationValue{dst: &o.CaseTimeoutMS, name: "case-timeout", max: time.Hour}, "case-timeout", "per-sample timeout (all its turns), e.g. 90s; a plain integer is milliseconds")
	fl.Var(&fractionValue{dst: &o.PassRateThreshold, name: "pass-rate-threshold"}, "pass-rate-threshold", "share of cases that must pass, 0..1")
	fl.Var(&fractionValue{dst: &o.SamplePassRateThreshold, name: "sample-pass-rate-threshold"}, "sample-pass-rate-threshold", "share of a case's samples that must pass, 0..1")
	fl.Var(&posIntValue{dst: &o.MinSuccessfulSamples, name: "min-successful-samples", valid: "1..--samples"}, "min-successful-samples", "samples of a case that must finish without error (default --samples)")
	choiceFlag(cmd, &o.EmptyCriteria, "empty-criteria", codeInvalidEmptyCriteria, evalengine.EmptyCriteriaError,
		"an empty criteria list is an error or passes", []string{evalengine.EmptyCriteriaError, evalengine.EmptyCriteriaPass})
	boolFlag(fl, &o.CaptureEvents, "capture-events", "keep agent events in the result")
	boolFlag(fl, &o.CaptureToolContent, "capture-tool-content", "keep tool args and results in trajectories")
}

// boolFlag registers a typed boolean flag (--flag alone is true).
func boolFlag(fl *pflag.FlagSet, dst *bool, name, usage string) {
	fl.Var(&boolValue{dst: dst, name: name}, name, usage)
	fl.Lookup(name).NoOptDefVal = "true"
	fl.Lookup(name).DefValue = strconv.FormatBool(*dst)
}

func newEvalRunCmd() *cobra.Command {
	f := newEvalRunFlags()
	cmd := &cobra.Command{
		Use:   "run (--config AGENT.json | --agent-url URL | --agent NAME [--nats URL]) --eval-set SET.json [flags]",
		Short: "Evaluate an agent on an eval set; exit 0 pass, 2 failed or regressed, 1 error",
		Long: `Run every case of the eval set through the agent, score it with the criteria,
and print the report. What names the agent picks the runner:

  --config AGENT.json   locally: a fresh agent, runner and session per sample
  --agent-url URL       locally, over HTTP: every turn is one POST of
                        {case_id, sample_id, turn_id, turn_index, input,
                        session_id}, answered by {output, events?, metadata?}
                        (see examples/http-agent/README.md)
  --agent NAME          on the cluster at --nats (default $ADK_CLUSTER), as a
                        job this process owns; NAME must be an agent a live
                        worker offers, else exit 1 before anything runs

Both runners produce the same result document and the same report.
Exit codes: 0 the evaluation passed (and did not regress against --baseline),
2 it completed but failed its thresholds or regressed, 1 any error (one line
on stderr). With --output PATH the report is also written atomically to PATH;
stdout and the file hold the same bytes (--quiet: the file only). On a
terminal, progress is drawn on stderr.

Default timeouts are sized for hosted models: --case-timeout 5m per sample,
--timeout 1h for the whole run (the maximum). Durations take Go syntax (30s,
5m, 1h); a plain integer is milliseconds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "agent config (AGENT.json, at most 1 MiB): run locally")
	fl.StringVar(&f.agentURL, "agent-url", "", "evaluate an HTTP agent at this http(s) URL instead of --config (one POST per turn)")
	f.registerJob(cmd)
	fl.StringVar(&f.judgeConfig, "judge-config", "", `this machine's LLM judge for llm_judge criteria (at most 1 MiB): {"provider": "gemini"|"openai", "model", "base_url", "api_key_env", "timeout_ms", "rate_limit"}`)
	fl.StringVar(&f.userSimConfig, "user-simulator-config", "", "this machine's LLM user simulator for Google ADK conversation_scenario cases (same shape as --judge-config); without it they are not_evaluated")
	fl.StringVar(&f.adkTestConfig, "adk-test-config", "", "Google ADK test_config.json whose criteria to use (default: test_config.json beside a Google ADK eval set, when --criteria is not given)")
	fl.StringVar(&f.baseline, "baseline", "", "baseline result to compare against: a result document (at most 16 MiB) or a JSON Lines result of any size")
	fl.StringVar(&f.tolerances, "metric-tolerances", "", "per-metric allowed score drop, {metric_id: fraction} (needs --baseline)")
	fl.Var(&fractionValue{dst: &f.maxPassRateDrop, name: "max-pass-rate-drop"}, "max-pass-rate-drop", "allowed pass-rate drop against the baseline, 0..1 (needs --baseline)")
	registerReportFlags(cmd, &f.format, &f.output, &f.suiteName, evalengine.FormatJSON)
	o := &f.opts
	fl.Var(&posIntValue{dst: &o.Concurrency, name: "concurrency", valid: "1..256"}, "concurrency", "samples in flight, 1..256")
	fl.Var(&posIntValue{dst: &o.SampleConcurrency, name: "sample-concurrency", valid: "1..256"}, "sample-concurrency", "samples of one case in flight, 1..256 (default --concurrency)")
	fl.Var(&posIntValue{dst: &o.MaxReportBytes, name: "max-report-bytes", valid: "1..16777216"}, "max-report-bytes", "one document's bound in bytes (default and maximum 16 MiB); a result over it streams and its report is rendered from the stream")
	fl.StringVar(&f.traceTo, "trace-to", "", "also publish this run's traces into the cluster at this NATS URL, under --scope (read them with adk trace query)")
	fl.StringVar(&f.settings, "settings", "", "settings file (adk config defaults): its log section (level, format, signal_warn_interval) logs --trace-to's lost-signal warnings")
	fl.DurationVar(&f.traceDrain, "trace-drain", defaultTraceDrain, "at exit, wait at most this long for traces to reach ADK_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_* (1ms..5m)")
	fl.StringVar(&f.resume, "resume", "", resumeUsage)
	fl.StringVar(&f.cache, "cache", "", "cache model responses in this directory (default $"+envCacheDir+"; AGENT.json agents only)")
	fl.StringVar(&f.cacheMode, "cache-mode", "", "response cache mode: read|write|readwrite|off (default readwrite with a cache directory)")
	_ = cmd.RegisterFlagCompletionFunc("cache-mode", cobra.FixedCompletions(respcache.Modes(), cobra.ShellCompDirectiveNoFileComp))
	f.cluster.register(cmd)
	return cmd
}

// registerReportFlags registers --format (completed in the shell),
// --output and --suite-name.
func registerReportFlags(cmd *cobra.Command, format, output, suite *string, def string) {
	choiceFlag(cmd, format, "format", evalengine.CodeInvalidReportFormat, def, "report format", evalengine.Formats())
	cmd.Flags().StringVar(output, "output", "-", "also write the report atomically to this file (- for stdout only)")
	cmd.Flags().StringVar(suite, "suite-name", "", "suite/tool name in JUnit and SARIF (default adk_eval)")
}

// optionName is the contract's name of a flag (--case-timeout ⇒ case_timeout).
func optionName(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

// optionFlags names the flag of each option Normalize can refuse.
var optionFlags = map[string]string{
	"concurrency": "--concurrency 1..256", "sample_concurrency": "--sample-concurrency 1..256",
	"sample_count": "--samples 1..100", "timeout_ms": "--timeout 1ms..1h", "case_timeout_ms": "--case-timeout 1ms..1h",
	"min_successful_samples": "--min-successful-samples 1..--samples", "max_report_bytes": "--max-report-bytes 1..16777216",
}

// options returns the checked run options.
func (f *evalRunFlags) options() (evalengine.Options, error) {
	n, err := f.opts.Normalize()
	if err != nil {
		var ee *evalengine.Error
		if errors.As(err, &ee) {
			return n, &cliError{Code: ee.Code, Reason: ee.Detail, Detail: optionFlags[ee.Detail], Err: err}
		}
		return n, engineError("", err)
	}
	return n, nil
}

// evalRunner is one way to run an eval: locally or on a cluster. Both
// return the same result document; the report and the exit code are the
// caller's.
type evalRunner interface {
	// prepare reads and checks every input, before anything runs.
	prepare(f *evalRunFlags, opts evalengine.Options) error
	// run evaluates and returns the result.
	run(ctx context.Context, cmd *cobra.Command, f *evalRunFlags, opts evalengine.Options) (*evalengine.Result, error)
	// secrets are the credential values the inputs named, scrubbed from
	// errors and reports.
	secrets() []string
	// finish releases what prepare started (the local trace export,
	// drained within --trace-drain); it never changes the verdict.
	finish(stderr io.Writer)
	// skipped are the conversation_scenario cases left out for want of a
	// user simulator.
	skipped() []string
}

// runner picks the runner from what names the agent, and checks that the
// flags given belong to it.
func (f *evalRunFlags) runner(cmd *cobra.Command) (evalRunner, error) {
	var named []string
	for _, n := range []struct{ flag, v string }{{"--config", f.config}, {"--agent-url", f.agentURL}, {"--agent", f.agentName}} {
		if n.v != "" {
			named = append(named, n.flag)
		}
	}
	if f.adkTestConfig != "" && f.criteria != "" {
		return nil, &cliError{Code: codeConflictingOptions, Reason: "--criteria,--adk-test-config", Detail: "name the criteria once"}
	}
	if len(named) > 1 {
		return nil, &cliError{Code: codeConflictingOptions, Reason: strings.Join(named, ","), Detail: "name the agent once: --config or --agent-url run locally, --agent on a cluster"}
	}
	var missing []string
	if len(named) == 0 {
		missing = append(missing, "--config|--agent-url|--agent")
	}
	if f.evalSet == "" {
		missing = append(missing, "--eval-set")
	}
	if len(missing) > 0 {
		return nil, &cliError{Code: codeMissingRequired, Reason: strings.Join(missing, ","),
			Detail: "--config AGENT.json or --agent-url URL runs locally, --agent NAME on the cluster at --nats"}
	}
	if f.agentName == "" {
		if f.cluster.changed(cmd.Flags()) {
			return nil, usageError{errors.New("--nats runs on a cluster, which takes --agent NAME (--config and --agent-url are local)")}
		}
		return &localRunner{}, nil
	}
	if f.judgeConfig != "" {
		return nil, usageError{errors.New("--judge-config is local: a cluster's judges are the workers' own")}
	}
	if f.userSimConfig != "" {
		return nil, usageError{errors.New("--user-simulator-config is local: a cluster does not simulate users (its conversation_scenario cases are not_evaluated)")}
	}
	if f.resume != "" || f.cache != "" || f.cacheMode != "" {
		return nil, usageError{errors.New("--resume, --cache and --cache-mode are local (--config or --agent-url)")}
	}
	return &clusterRunner{cf: &f.cluster}, nil
}

// runEval is `adk eval run`.
func runEval(cmd *cobra.Command, f *evalRunFlags) (err error) {
	r, err := f.runner(cmd)
	if err != nil {
		return err
	}
	if _, local := r.(*localRunner); local {
		// The run's heap goal stays at a floor (gcfloor.go), in a range
		// of the heap backed by huge pages.
		evalheap.Ready()
		defer holdGCFloor()()
	}
	opts, cmpOpts, err := f.validate(cmd)
	if err != nil {
		return err
	}
	// From here on every error message is scrubbed of the secrets the
	// inputs name (the agent config's api_key_env variables, the judge's).
	defer func() { err = redact(err, r.secrets()) }()
	defer r.finish(cmd.ErrOrStderr())
	if err := r.prepare(f, opts); err != nil {
		return err
	}
	if l, ok := r.(*localRunner); ok && f.format == evalengine.FormatAnnotations && len(l.set.Cases) > evalengine.MaxExportFindings {
		// Annotations are capped by contract: refused before any model
		// call rather than after the run.
		return &cliError{Code: codeReportRenderFailed, Reason: evalengine.CodeAnnotationLimitExceeded,
			Detail: fmt.Sprintf("annotations hold at most %d cases, the set has %d: use --format sarif or junit", evalengine.MaxExportFindings, len(l.set.Cases))}
	}
	baseline, err := f.loadBaseline(&cmpOpts)
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
	c, _ := r.(*clusterRunner)
	if c != nil && f.format == evalengine.FormatJSONL && baseline == nil {
		// A cluster job's jsonl is its stream, page by page, of any size.
		c.streamTo = &f.output
	}
	result, err := r.run(ctx, cmd, f, opts)
	if err != nil {
		return err
	}
	if c != nil && c.streamTo != nil {
		if !c.passed {
			return &exitCodeError{Code: exitFailed}
		}
		return nil
	}
	if c != nil && c.streamed != nil {
		// Over one document: rendered from the job's stream.
		return c.streamed.report(cmd, f, opts.MaxReportBytes, baseline, cmpOpts, nil)
	}
	evalengine.MarkNotEvaluated(result, r.skipped(), evalengine.NotEvaluatedUserSimulator)
	// A local run may stream its report (jsonl) and keeps a journal that
	// outlives a failed report (evaljournal.go).
	l, _ := r.(*localRunner)
	if l != nil && l.stream != nil {
		return l.stream.finish(reportWriter(cmd, f.output), f.output, result)
	}
	if l != nil && l.spill != nil && l.spill.active {
		err = l.spill.report(cmd, f, result, opts, baseline, cmpOpts, r.secrets())
	} else {
		err = f.report(cmd, result, baseline, cmpOpts, opts, r.secrets())
	}
	if l != nil {
		var ec *exitCodeError
		l.journal.finish(cmd.ErrOrStderr(), err == nil || errors.As(err, &ec), l.cut)
	}
	return err
}

// localRunner runs the eval in this process.
type localRunner struct {
	creds   []string
	set     *evalengine.Set
	metrics []evalengine.Metric
	adapter evalengine.Adapter
	tracing *localTracing
	skip    []string
	cache   *respcache.Cache
	journal *evalJournal
	stream  *evalStream
	spill   *evalSpill // a result over one document (evalspill.go)
	cut     int        // samples --timeout cut off, not journaled
	// callsAtOnce is how many model calls a sample of the agent can have
	// in flight at once (agent.Config.CallsAtOnce).
	callsAtOnce int
	// limits are the run's provider rate limiters (agent, judge, user
	// simulator), summed up on stderr at the end.
	limits *evalengine.RateLimiters
}

func (l *localRunner) secrets() []string { return l.creds }
func (l *localRunner) skipped() []string { return l.skip }

func (l *localRunner) finish(stderr io.Writer) {
	l.journal.close()
	if err := l.cache.Close(); err != nil {
		fmt.Fprintf(stderr, "adk: warning: closing the response cache: %v\n", err)
	}
	if l.tracing != nil {
		l.tracing.finish(stderr)
	}
	printRateLimits(stderr, l.limits)
}

// printRateLimits writes one line per rate-limited endpoint that was
// called: the adk_ratelimit_* figures of a worker's metrics endpoint. A
// local run is one process that ends with its report, so its totals go
// where its other end-of-run notes go rather than to a scrape endpoint
// that would be gone before a scraper saw the last figures.
func printRateLimits(w io.Writer, limits *evalengine.RateLimiters) {
	if limits == nil {
		return
	}
	for _, lim := range limits.Limiters() {
		s := lim.Stats()
		if s.Admitted == 0 && s.Throttled == 0 {
			continue
		}
		fmt.Fprintf(w, "adk: rate limit %s: granted %d, throttled %d (429), waited %.1f s\n", s.Endpoint, s.Admitted, s.Throttled, s.WaitSeconds)
	}
}

func (l *localRunner) prepare(f *evalRunFlags, opts evalengine.Options) error {
	// The agent config comes first, so its secrets scrub every later error.
	var cfgData []byte
	var err error
	if f.config != "" {
		if cfgData, err = readCapped("config", f.config, maxConfigFileBytes); err != nil {
			return err
		}
		l.creds = configSecrets(cfgData)
	}
	var judge *evalengine.ModelEnv
	var judgeData []byte // for the resume digest
	if f.judgeConfig != "" {
		if judge, err = loadJudgeConfig(f.judgeConfig); err != nil {
			return err
		}
		l.creds = append(l.creds, judgeSecrets(judge)...)
		// For the resume digest: the judge is part of what scores mean.
		judgeData, _ = readCapped("judge_config", f.judgeConfig, maxConfigFileBytes)
	}
	var userSim *evalengine.ModelEnv
	if f.userSimConfig != "" {
		if userSim, err = loadModelConfig(f.userSimConfig, "user_simulator_config", codeInvalidUserSimulatorConfig); err != nil {
			return err
		}
		l.creds = append(l.creds, judgeSecrets(userSim)...)
		simData, _ := readCapped("user_simulator_config", f.userSimConfig, maxConfigFileBytes)
		judgeData = append(judgeData, simData...)
	}
	// The process owns one limiter per endpoint (provider, base URL,
	// model), shared by the agent, every judge metric and every scenario
	// user calling it: together they stay under the endpoint's limit, and
	// two different limits for it are refused naming both files.
	l.limits = evalengine.NewRateLimiters()
	for _, e := range []struct {
		env    *evalengine.ModelEnv
		source string
	}{{judge, "--judge-config " + f.judgeConfig}, {userSim, "--user-simulator-config " + f.userSimConfig}} {
		if e.env != nil {
			e.env.RateLimits, e.env.RateLimitSource = l.limits, e.source
		}
	}
	var format evalengine.SetFormat
	if l.set, format, err = loadEvalSetFormat(f.evalSet); err != nil {
		return err
	}
	criteria, maxTurns, err := f.criteriaDoc(format)
	if err != nil {
		return err
	}
	l.metrics = evalengine.DefaultCriteria()
	if criteria != nil {
		if l.metrics, err = evalengine.ParseCriteriaWithOptions(criteria, evalengine.CriteriaOptions{Judge: judge}); err != nil {
			return engineError("", err)
		}
	}
	set := l.set // the digests are of the whole set, scenario cases too
	f.digestInputs = func() (map[string]string, error) {
		return runDigests(cfgData, f.agentURL, set, criteria, judgeData, opts)
	}
	if f.resume != "" || (f.output != "" && f.output != "-") || f.format == evalengine.FormatJSONL {
		// A journal's header and a jsonl stream's carry them.
		if err := f.fillDigests(); err != nil {
			return err
		}
	}
	if l.cache, err = openEvalCache(f.cache, f.cacheMode, f.agentURL); err != nil {
		return err
	}
	to := traceTarget{url: f.traceTo, principal: f.cluster.scope, log: f.traceLog, warnEvery: f.traceWarnEvery}
	if l.tracing, err = startLocalTracing(os.Getenv, "adk-eval", f.traceDrain, to); err != nil {
		return err
	}
	if l.adapter, l.callsAtOnce, err = f.adapter(cfgData, opts, l.tracing.observer(), cacheWrap(l.cache), l.limits); err != nil {
		return err
	}
	if userSim == nil {
		l.set, l.skip = evalengine.WithoutScenarioCases(l.set)
		return nil
	}
	// Build the simulator's model once now: a configuration it cannot run
	// with (a rate_limit differing from the agent's for one endpoint) is
	// the run's typed error naming both files, not an untold
	// invalid_eval_simulation_scenario on every scenario case.
	if _, err := evalengine.NewLLMUser(evalengine.LLMUserConfig{Persona: "-", Goal: "-"}, *userSim); err != nil {
		return engineError("", err)
	}
	l.adapter = &evalengine.ScenarioRouter{Script: l.adapter, Scenario: &evalengine.ScenarioAdapter{
		Agent:   l.adapter,
		NewUser: evalengine.GoogleScenarioUser(evalengine.LLMUserConfig{}, *userSim, maxTurns),
		// One user turn is one model call: the simulation's callback bound
		// (30 s at most) covers the user simulator's own request timeout.
		Options: evalengine.SimulationOptions{CallbackTimeoutMS: 30_000, MaxSteps: maxTurns + 1, MaxValueBytes: evalengine.DefaultSimulationOptions().MaxValueBytes},
	}}
	return nil
}

// criteriaDoc returns the criteria document to use (nil: the default) and
// the scenario turn bound: --criteria, else --adk-test-config, else a
// test_config.json beside a Google ADK eval set (as adk-python's
// AgentEvaluator finds it).
func (f *evalRunFlags) criteriaDoc(format evalengine.SetFormat) ([]byte, int, error) {
	if f.criteria != "" {
		data, err := readCapped("criteria", f.criteria, maxConfigFileBytes)
		return data, evalengine.DefaultScenarioMaxTurns, err
	}
	path := f.adkTestConfig
	if path == "" && format != evalengine.SetFormatADK {
		beside := filepath.Join(filepath.Dir(f.evalSet), evalengine.GoogleTestConfigFile)
		if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() {
			path = beside
		}
	}
	if path == "" {
		return nil, evalengine.DefaultScenarioMaxTurns, nil
	}
	data, err := readCapped("adk_test_config", path, maxConfigFileBytes)
	if err != nil {
		return nil, 0, err
	}
	tc, err := evalengine.ParseGoogleTestConfig(data)
	if err != nil {
		return nil, 0, engineError("", err)
	}
	return tc.Criteria, tc.MaxTurns, nil
}

func (l *localRunner) run(ctx context.Context, cmd *cobra.Command, f *evalRunFlags, opts evalengine.Options) (*evalengine.Result, error) {
	journal, err := openJournal(f.resume, f.output, cmd.ErrOrStderr(), l.set, opts.Samples, f.digests)
	if err != nil {
		return nil, err
	}
	l.journal = journal
	rc := evalengine.RunConfig{Adapter: l.adapter, Metrics: l.metrics, Options: opts, Observer: l.tracing.observer()}
	if journal != nil {
		rc.Finished, rc.OnSample = journal.finished, journal.record
		journal.scrub(l.creds)
	}
	// jsonl streams: samples go out as they finish and only case
	// aggregates stay in memory (evaljournal.go).
	if l.stream, err = f.startStream(reportWriter(cmd, f.output), journal, l.set, opts.Samples, f.digests, l.creds); err != nil {
		return nil, err
	}
	if l.stream != nil {
		rc.OnSample, rc.DropSamples = l.stream.record, true
	}
	total := len(l.set.Cases) * opts.Samples
	p := newProgress(progressWriter(cmd))
	if p != nil {
		rc.Progress = p.update
		p.begin(total)
	}
	// A run in another format may pass one document's bound: it then
	// goes on streaming (evalspill.go), also with --baseline
	// (evalbaseline.go).
	if l.stream == nil {
		l.spill = &evalSpill{}
		rc.OnSample = l.spill.onSample(rc.OnSample)
	}
	began := time.Now()
	var result *evalengine.Result
	// A set whose cases alone pass the bound streams from the start.
	streamNow := l.spill != nil && evalengine.ResultFixedBytes(len(l.set.Cases), len(l.metrics)) > opts.MaxReportBytes
	// A stopped worker makes no model call: the provider connections
	// beyond what the workers still running can use at once are closed as
	// they stop, while the run waits for its last answers, so that the
	// process's exit has none to close after the report
	// (evalcore.RunConfig.WorkersRunning). A sample's judge and user
	// simulator call one at a time, after or between its agent's calls.
	// The bound is lifted before each run and after.
	agent.KeepIdleConnections(-1)
	defer agent.KeepIdleConnections(-1)
	rc.WorkersRunning = func(n int) { agent.KeepIdleConnections(n * max(l.callsAtOnce, 1)) }
	if !streamNow {
		result, err = evalengine.Run(ctx, l.set, rc)
	}
	if l.spill != nil && (streamNow || overBudget(err)) {
		var rc2 evalengine.RunConfig
		if err = f.fillDigests(); err == nil {
			rc2, err = l.spill.start(rc, journal, l.set, opts.Samples, f.digests, l.creds, time.Since(began))
		}
		if err == nil {
			agent.KeepIdleConnections(-1)
			result, err = evalengine.Run(ctx, l.set, rc2)
		}
		if err != nil {
			l.spill.discard()
		}
	}
	if p != nil {
		p.end() // before the partial report below
	}
	if err != nil {
		if evalengine.ErrorCode(err) == evalengine.CodeEvaluationCancelled {
			journal.interrupted(cmd.ErrOrStderr(), total)
		} else {
			journal.discardEmpty()
		}
		return nil, engineError(codeEvaluationFailed, err)
	}
	l.cut = journal.cutSamples()
	recordCacheStats(result, l.cache)
	return result, nil
}

// clusterRunner runs the eval as a job on a cluster, owned by this process.
type clusterRunner struct {
	cf  *clusterFlags
	job *clusterJob
	// streamTo, when set, is the --output the job's result stream is
	// written to (jsonl, any size) instead of fetching one document;
	// passed is then the summary's verdict.
	streamTo *string
	passed   bool
	// streamed is the job's result past one document (--max-report-bytes),
	// fetched as its stream into a temporary file: the report is rendered
	// from it as a local run's past the bound is (evalbaseline.go).
	streamed *streamedRun
}

func (*clusterRunner) secrets() []string   { return nil }
func (*clusterRunner) finish(io.Writer)    {}
func (c *clusterRunner) skipped() []string { return c.job.skipped }

func (c *clusterRunner) prepare(f *evalRunFlags, opts evalengine.Options) (err error) {
	c.job, err = prepareClusterJob(f.agentName, f.evalSet, f.criteria, opts)
	return err
}

func (c *clusterRunner) run(ctx context.Context, cmd *cobra.Command, f *evalRunFlags, opts evalengine.Options) (*evalengine.Result, error) {
	cl, done, err := c.cf.client()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := checkClusterAgent(ctx, cl, c.job.agent); err != nil {
		return nil, err
	}
	j, err := runOwnedJob(ctx, cmd, cl, c.cf.scope, c.job)
	if err != nil {
		return nil, err
	}
	if c.streamTo != nil {
		if j.Phase != evalrecord.PhaseCompleted {
			return nil, &cliError{Code: codeEvaluationFailed, Reason: string(j.Phase), Detail: "job " + j.JobID + ": " + j.Reason}
		}
		c.passed, err = streamClusterResult(ctx, cmd, cl, c.cf.scope, j.JobID, *c.streamTo)
		return nil, err
	}
	if j.Phase == evalrecord.PhaseCompleted {
		over, err := resultOverBound(ctx, cl, c.cf.scope, j.JobID, opts.MaxReportBytes)
		if err != nil {
			return nil, err
		}
		if over {
			// Beside --output, so that keeping it as FILE.jsonl is a
			// rename on one file system.
			dir := ""
			if f.output != "" && f.output != "-" {
				dir = filepath.Dir(f.output)
			}
			c.streamed, err = fetchClusterStream(ctx, cl, c.cf.scope, j.JobID, dir)
			return nil, err
		}
	}
	return fetchResult(ctx, cl, c.cf.scope, j)
}

// validate checks the flags every `eval run` checks before reading a file,
// local or on a cluster: the output path, run options, and the comparison
// options (which need --baseline).
func (f *evalRunFlags) validate(cmd *cobra.Command) (evalengine.Options, evalengine.CompareOptions, error) {
	cmpOpts := evalengine.CompareOptions{MaxPassRateDrop: f.maxPassRateDrop}
	if err := checkOutputPath(f.output); err != nil {
		return evalengine.Options{}, cmpOpts, err
	}
	opts, err := f.options()
	if err != nil {
		return evalengine.Options{}, cmpOpts, err
	}
	if f.baseline == "" && (cmd.Flags().Changed("max-pass-rate-drop") || f.tolerances != "") {
		return evalengine.Options{}, cmpOpts, &cliError{Code: codeBaselineRequired, Detail: "--max-pass-rate-drop and --metric-tolerances compare against --baseline RESULT.json"}
	}
	if err := f.resolveSettings(cmd.ErrOrStderr()); err != nil {
		return evalengine.Options{}, cmpOpts, err
	}
	return opts, cmpOpts, nil
}

// resolveSettings reads --settings (the defaults without it), validated
// as every command's settings file is: its log section logs --trace-to's
// lost-signal warnings on stderr, as adk worker logs its own.
func (f *evalRunFlags) resolveSettings(stderr io.Writer) error {
	s := settings.Defaults()
	if f.settings != "" {
		var err error
		if s, err = settings.Load(f.settings); err == nil {
			err = s.Validate()
		}
		if err != nil {
			var se *settings.Error
			if errors.As(err, &se) && se.Key == "--config" { // the file itself: this command's flag
				se.Key = "--settings"
			}
			return settingsError(err)
		}
	}
	f.traceLog, f.traceWarnEvery = s.Log.Logger(stderr), s.Log.SignalWarnInterval.D()
	return nil
}

// loadBaseline reads --metric-tolerances into cmpOpts and --baseline, if
// given (nil otherwise), as its side of the comparison: a result document
// or a JSON Lines result of any size (evalbaseline.go).
func (f *evalRunFlags) loadBaseline(cmpOpts *evalengine.CompareOptions) (*evalengine.CompareSide, error) {
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
	return loadSide("baseline", f.baseline, codeInvalidBaseline)
}

// report renders the run's report (the comparison for json/markdown when a
// baseline is given), writes it, and turns the verdict into the exit code:
// the baseline gate is ANDed with the result's own verdict.
func (f *evalRunFlags) report(cmd *cobra.Command, result *evalengine.Result, baseline *evalengine.CompareSide, cmpOpts evalengine.CompareOptions, opts evalengine.Options, secrets []string) error {
	passed := result.Passed
	var cmp *evalengine.Comparison
	if baseline != nil {
		cur, err := evalengine.ResultSide(result)
		if err == nil {
			cmp, err = evalengine.CompareSides(baseline, cur, cmpOpts)
		} else {
			err = &evalengine.Error{Code: evalengine.CodeInvalidCurrentResult, Reason: evalengine.ErrorCode(err), Err: err}
		}
		if err != nil {
			return engineError(codeComparisonFailed, err)
		}
		passed = passed && cmp.Passed
	}
	// The digests are filled for jsonl (prepare), the one format whose
	// document carries them.
	exportOpts := evalengine.ExportOptions{SuiteName: f.suiteName, MaxBytes: opts.MaxReportBytes, StreamDigests: f.digests}
	if cmp != nil && (f.format == evalengine.FormatJSON || f.format == evalengine.FormatMarkdown) {
		// The comparison document, a case row at a time: past the bound
		// (a baseline of 100,000 cases) it is written whole.
		err := emitComparison(cmd, f.output, opts.MaxReportBytes, codeReportRenderFailed, secrets, func(w io.Writer) (int64, error) {
			return evalengine.WriteComparison(w, cmp, f.format, exportOpts)
		})
		if err != nil {
			return err
		}
		if !passed {
			return &exitCodeError{Code: exitFailed}
		}
		return nil
	}
	if f.format == evalengine.FormatJSON {
		// Written in pieces through the scrub, never held as one
		// document: a 5,000-sample report is megabytes of fresh memory
		// at the end of a run. Nothing is written when it is refused.
		err := emitStreamed(cmd, f.output, func(w io.Writer) error {
			bw := bufio.NewWriterSize(w, 64<<10)
			sw := newScrubWriter(bw, secrets)
			if err := evalengine.WriteJSON(sw, result, exportOpts); err != nil {
				if evalengine.ErrorCode(err) == "" {
					return err // the output failed
				}
				return engineError(codeReportRenderFailed, err)
			}
			if err := sw.Close(); err != nil {
				return err
			}
			return bw.Flush()
		})
		if err != nil {
			return err
		}
		if !passed {
			return &exitCodeError{Code: exitFailed}
		}
		return nil
	}
	var data []byte
	var err error
	if f.format == evalengine.FormatHTML {
		// The HTML report is the job page: the result and, with a
		// baseline, its comparison in one file.
		data, err = evalengine.RenderHTML(result, cmp, exportOpts)
	} else {
		data, err = evalengine.Render(result, f.format, exportOpts)
	}
	if evalengine.ErrorCode(err) == evalengine.CodeExportByteLimitExceeded && f.format != evalengine.FormatJSON {
		// The result fits one document but this report of it does not:
		// rendered case by case from its stream form (html: one page,
		// with the comparison's rows paged too).
		if err := renderOverBound(cmd, f.output, result, cmp, f.format, exportOpts, secrets); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "adk: the %s report is over one %d-byte document: it was rendered case by case%s\n", f.format, opts.MaxReportBytes, htmlPageNote(f.format))
		if !passed {
			return &exitCodeError{Code: exitFailed}
		}
		return nil
	}
	if err != nil {
		return engineError(codeReportRenderFailed, err)
	}
	// The engine prunes and redacts what it records; this is the last
	// line: no credential the machine holds leaves in a report.
	data = scrubReport(data, secrets)
	if err := emitReport(reportWriter(cmd, f.output), f.output, data); err != nil {
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
// callsAtOnce is how many model calls one sample can have in flight at
// once in this process (agent.Config.CallsAtOnce; 1 with --agent-url,
// where only a judge or a user simulator calls from here).
func (f *evalRunFlags) adapter(cfgData []byte, opts evalengine.Options, obs observability.Observer, wrap func(model.Provider, string, evalengine.SampleInfo) model.Provider, limits *evalengine.RateLimiters) (_ evalengine.Adapter, callsAtOnce int, _ error) {
	if f.agentURL != "" {
		u, err := url.Parse(f.agentURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			// The URL itself is not echoed: it may carry a token.
			return nil, 0, &cliError{Code: codeInvalidAgentURL, Reason: "http_or_https_url_without_credentials"}
		}
		a, err := httpadapter.New(httpadapter.Config{URL: f.agentURL})
		if err != nil {
			return nil, 0, &cliError{Code: codeInvalidAgentURL, Err: err}
		}
		return a, 1, nil
	}
	cfg, err := agent.ParseConfigWith(cfgData, agent.ConfigOptions{RateLimits: limits, Source: "--config " + f.config})
	if err != nil {
		return nil, 0, agentConfigError(err)
	}
	a, err := agentadapter.New(cfg, agentadapter.Options{CaptureEvents: opts.CaptureEvents, Build: agent.BuildOptions{Observer: obs}, WrapModel: wrap})
	if err != nil {
		return nil, 0, &cliError{Code: codeInvalidAgentConfig, Err: err}
	}
	return a, cfg.CallsAtOnce(), nil
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

// htmlTextTemplate writes a string the way the HTML report's text does.
// It is parsed on first use, by a run with secrets, not in the package
// init of every adk process.
var htmlTextTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("text").Parse("{{.}}"))
})

// htmlText is s as html/template writes it in text (it escapes more than
// template.HTMLEscapeString: + and NUL too).
func htmlText(s string) string {
	var b strings.Builder
	if err := htmlTextTemplate().Execute(&b, s); err != nil {
		return s
	}
	return b.String()
}

// scrubReport replaces every secret in rendered report bytes. It copies
// only when one is present.
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
