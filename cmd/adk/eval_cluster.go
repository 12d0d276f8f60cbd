package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
)

// Environment variables of the cluster commands. The password is only
// ever read from the environment, never from a flag, and never printed.
const (
	envCluster      = "ADK_CLUSTER"
	envNATSPassword = "ADK_NATS_PASSWORD"
)

// Cluster-side CLI error codes.
const (
	codeClusterUnavailable = "eval_cluster_unavailable"
)

// Owner lease of a CLI that waits for its job: the job is cancelled when
// the CLI stops renewing for ownerTTL.
const (
	ownerTTL       = 10 * time.Second
	ownerRenew     = 2 * time.Second
	statusInterval = 200 * time.Millisecond
)

// natsFlags are the connection flags shared by the cluster commands.
type natsFlags struct {
	url, creds, nkey, user string
}

func (f *natsFlags) register(fs *pflag.FlagSet, name, help string) {
	fs.StringVar(&f.url, name, os.Getenv(envCluster), help+" (default $"+envCluster+")")
	fs.StringVar(&f.creds, "nats-creds", "", "NATS credentials file (JWT + nkey)")
	fs.StringVar(&f.nkey, "nats-nkey", "", "NATS nkey seed file")
	fs.StringVar(&f.user, "nats-user", "", "NATS user; the password is read from $"+envNATSPassword)
}

// connect dials NATS with the configured credentials. bus.Connect scrubs
// URL credentials from its errors.
func (f *natsFlags) connect(flag, name string, extra ...nats.Option) (*nats.Conn, error) {
	if f.url == "" {
		return nil, &cliError{Code: codeMissingRequired, Reason: optionName(flag)}
	}
	opts := []bus.Option{bus.WithName(name), bus.WithConnectTimeout(5 * time.Second)}
	switch {
	case f.creds != "":
		opts = append(opts, bus.WithCredsFile(f.creds))
	case f.nkey != "":
		opts = append(opts, bus.WithNkeySeedFile(f.nkey))
	case f.user != "":
		opts = append(opts, bus.WithUserPassword(f.user, os.Getenv(envNATSPassword)))
	}
	if len(extra) > 0 {
		opts = append(opts, bus.WithNATSOptions(extra...))
	}
	nc, err := bus.Connect(f.url, opts...)
	if err != nil {
		return nil, &cliError{Code: codeClusterUnavailable, Detail: err.Error(), Err: err}
	}
	return nc, nil
}

// clusterFlags are what every `adk eval <op> --cluster` command takes.
type clusterFlags struct {
	natsFlags
	scope   string
	timeout time.Duration
}

func (f *clusterFlags) register(cmd *cobra.Command) {
	f.natsFlags.register(cmd.Flags(), "cluster", "NATS URL of the eval cluster")
	cmd.Flags().StringVar(&f.scope, "scope", "default", "app scope of the jobs")
	cmd.Flags().DurationVar(&f.timeout, "request-timeout", 30*time.Second, "timeout of one service call")
}

func (f *clusterFlags) client() (*client.Client, func(), error) {
	nc, err := f.connect("cluster", "adk-cli")
	if err != nil {
		return nil, nil, err
	}
	return client.New(nc, f.timeout), nc.Close, nil
}

// serviceError maps a coordinator error onto the CLI's one-line error.
func serviceError(err error) error {
	if err == nil {
		return nil
	}
	var ce *cliError
	if errors.As(err, &ce) {
		return err
	}
	ae := api.AsError(err)
	return &cliError{Code: ae.Code, Reason: ae.Reason, Detail: ae.Detail, Err: err}
}

// attachClusterEvalCmds adds the cluster commands to `adk eval` and lets
// `eval run` and `eval report` take --cluster.
func attachClusterEvalCmds(eval *cobra.Command) *cobra.Command {
	eval.AddCommand(newEvalSubmitCmd(), newEvalStatusCmd(), newEvalResultCmd(), newEvalCancelCmd(), newEvalJobsCmd())
	for _, sub := range eval.Commands() {
		switch sub.Name() {
		case "run":
			extendEvalRun(sub)
		case "report":
			extendEvalReport(sub)
		}
	}
	return eval
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// newJobCmd builds a `JOB_ID --cluster URL` command: it connects, runs do
// with the coordinator client, and closes the connection.
func newJobCmd(use, short string, do func(cmd *cobra.Command, cl *client.Client, scope, id string) error) *cobra.Command {
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			return do(cmd, cl, cf.scope, args[0])
		},
	}
	cf.register(cmd)
	return cmd
}

func newEvalStatusCmd() *cobra.Command {
	return newJobCmd("status JOB_ID --cluster URL", "Show a cluster job's phase and progress (JSON)",
		func(cmd *cobra.Command, cl *client.Client, scope, id string) error {
			j, err := cl.Status(cmd.Context(), scope, id)
			if err != nil {
				return serviceError(err)
			}
			return writeJSON(cmd.OutOrStdout(), j)
		})
}

func newEvalResultCmd() *cobra.Command {
	return newJobCmd("result JOB_ID --cluster URL", "Print a completed cluster job's result document (JSON)",
		func(cmd *cobra.Command, cl *client.Client, scope, id string) error {
			res, err := cl.Result(cmd.Context(), scope, id)
			if err != nil {
				return serviceError(err)
			}
			_, err = cmd.OutOrStdout().Write(res)
			return err
		})
}

func newEvalCancelCmd() *cobra.Command {
	return newJobCmd("cancel JOB_ID --cluster URL", "Cancel a queued or running cluster job",
		func(cmd *cobra.Command, cl *client.Client, scope, id string) error {
			j, err := cl.Cancel(cmd.Context(), scope, id)
			if err != nil {
				return serviceError(err)
			}
			return writeJSON(cmd.OutOrStdout(), j)
		})
}

func newEvalJobsCmd() *cobra.Command {
	var cf clusterFlags
	var limit int
	var cursor string
	cmd := &cobra.Command{
		Use:   "jobs --cluster URL",
		Short: "List a scope's cluster jobs (JSON page)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			page, err := cl.ListJobs(cmd.Context(), cf.scope, limit, cursor)
			if err != nil {
				return serviceError(err)
			}
			return writeJSON(cmd.OutOrStdout(), page)
		},
	}
	cf.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "jobs per page")
	cmd.Flags().StringVar(&cursor, "cursor", "", "page cursor from a previous listing")
	return cmd
}

// clusterJob is a prepared submission: the canonical set, criteria and
// options, checked locally first so a bad file fails before any call.
type clusterJob struct {
	agent   string
	set     *evalengine.Set
	req     api.SubmitRequest
	opts    evalengine.Options
	samples int
}

func prepareClusterJob(agentName, setPath, criteriaPath string, opts evalengine.Options) (*clusterJob, error) {
	var missing []string
	if agentName == "" {
		missing = append(missing, "agent")
	}
	if setPath == "" {
		missing = append(missing, "eval_set")
	}
	if len(missing) > 0 {
		return nil, &cliError{Code: codeMissingRequired, Reason: strings.Join(missing, ",")}
	}
	set, _, err := loadEvalSetFormat(setPath)
	if err != nil {
		return nil, err
	}
	// The canonical schema-2 document: the cluster sees exactly the set
	// a local run would (a Google ADK file's derived ids included).
	setDoc, err := evalengine.EncodeSet(set)
	if err != nil {
		return nil, engineError(evalengine.CodeInvalidEvalSet, err)
	}
	j := &clusterJob{agent: agentName, set: set, opts: opts}
	j.req = api.SubmitRequest{Set: setDoc, Agent: agentName}
	if criteriaPath != "" {
		data, err := readCapped("criteria", criteriaPath, maxConfigFileBytes)
		if err != nil {
			return nil, err
		}
		if _, err := evalengine.ParseCriteria(data); err != nil {
			return nil, engineError("", err)
		}
		j.req.Criteria = data
	}
	if j.req.Options, err = evalengine.EncodeOptions(opts); err != nil {
		return nil, err
	}
	j.samples = len(set.Cases) * opts.Samples
	return j, nil
}

func newOwnerID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

func newEvalSubmitCmd() *cobra.Command {
	var cf clusterFlags
	f := &evalRunFlags{}
	var agentName string
	var detach bool
	cmd := &cobra.Command{
		Use:   "submit --cluster URL --agent NAME --eval-set SET.json [flags]",
		Short: "Submit an eval job to a cluster; print the job (JSON)",
		Long: `Submit a job and print it. With --detach the cluster owns the job and the
command returns at once; without, this process is the job's owner: it
renews its owner lease until the job ends (Ctrl-C cancels the job) and
prints the final job.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			job, err := prepareClusterJob(agentName, f.evalSet, f.criteria, opts)
			if err != nil {
				return err
			}
			cl, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			if detach {
				j, err := cl.Submit(cmd.Context(), cf.scope, job.req)
				if err != nil {
					return serviceError(err)
				}
				return writeJSON(cmd.OutOrStdout(), j)
			}
			j, err := runOwnedJob(cmd, cl, cf.scope, job)
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), j)
		},
	}
	cf.register(cmd)
	registerClusterJobFlags(cmd.Flags(), f, &agentName)
	cmd.Flags().BoolVar(&detach, "detach", false, "return after submitting; the cluster owns the job")
	return cmd
}

// registerClusterJobFlags are the job-defining flags of `eval submit`,
// named as `eval run` names them.
func registerClusterJobFlags(fl *pflag.FlagSet, f *evalRunFlags, agentName *string) {
	fl.StringVar(agentName, "agent", "", "agent name, one the cluster's workers are configured with")
	fl.StringVar(&f.evalSet, "eval-set", "", "eval set: schema 2, schema 1, Google ADK .evalset.json or .test.json (at most 16 MiB)")
	fl.StringVar(&f.criteria, "criteria", "", `criteria file (default [{"id":"response","criterion":"exact_response"}])`)
	fl.StringVar(&f.samples, "samples", "", "samples per case, 1..100 (default 1)")
	fl.StringVar(&f.timeout, "timeout", "", "whole-run timeout in ms (default 60000)")
	fl.StringVar(&f.caseTimeout, "case-timeout", "", "per-sample timeout in ms (default 30000)")
	fl.StringVar(&f.passRate, "pass-rate-threshold", "", "share of cases that must pass, 0..1 (default 1)")
	fl.StringVar(&f.samplePassRate, "sample-pass-rate-threshold", "", "share of a case's samples that must pass, 0..1 (default 1)")
	fl.StringVar(&f.minSuccessful, "min-successful-samples", "", "samples of a case that must finish without error (default --samples)")
	fl.StringVar(&f.emptyCriteria, "empty-criteria", "", "an empty criteria list is an error or passes: error|pass (default error)")
	fl.StringVar(&f.captureEvents, "capture-events", "", "keep agent events in the result: true|false (default true)")
	fl.StringVar(&f.captureToolContent, "capture-tool-content", "", "keep tool args and results in trajectories: true|false (default false)")
}

// runOwnedJob submits a job owned by this process, renews the owner lease
// while it waits, shows progress on a terminal, and cancels the job when
// interrupted. It returns the terminal job.
func runOwnedJob(cmd *cobra.Command, cl *client.Client, scope string, job *clusterJob) (*evalrecord.Job, error) {
	owner := newOwnerID()
	lease, err := cl.KeepOwner(owner, ownerRenew)
	if err != nil {
		return nil, err
	}
	defer lease.Stop()
	job.req.Owner, job.req.OwnerTTLMS = owner, ownerTTL.Milliseconds()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	j, err := cl.Submit(ctx, scope, job.req)
	if err != nil {
		return nil, serviceError(err)
	}
	p := newClusterProgress(cmd.ErrOrStderr(), j.JobID)
	defer p.end()
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for !j.Phase.Terminal() {
		select {
		case <-ctx.Done():
			// Interrupted: the job must not outlive its owner.
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, cerr := cl.Cancel(cctx, scope, j.JobID)
			if cerr != nil && api.AsError(cerr).Code != api.CodeAlreadyTerminal {
				return nil, &cliError{Code: codeEvaluationFailed, Reason: "interrupted", Detail: "job " + j.JobID + " not cancelled: " + api.AsError(cerr).Code}
			}
			return nil, &cliError{Code: codeEvaluationFailed, Reason: "interrupted", Detail: "job " + j.JobID + " cancelled"}
		case <-t.C:
		}
		next, err := cl.Status(ctx, scope, j.JobID)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return nil, serviceError(err)
		}
		j = next
		p.update(j)
	}
	return j, nil
}

// clusterProgress draws a cluster job's progress on a terminal.
type clusterProgress struct {
	w     io.Writer
	job   string
	start time.Time
}

func newClusterProgress(w io.Writer, job string) *clusterProgress {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f.Fd()) {
		return nil
	}
	return &clusterProgress{w: w, job: job, start: time.Now()}
}

func (p *clusterProgress) update(j *evalrecord.Job) {
	if p == nil {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[2Kadk eval: job %s %s, %d/%d samples, %d errors, %s", p.job, j.Phase,
		j.Progress.Done, j.Progress.Total, j.Progress.Errors, time.Since(p.start).Round(100*time.Millisecond))
}

func (p *clusterProgress) end() {
	if p != nil {
		fmt.Fprint(p.w, "\r\x1b[2K")
	}
}

// fetchResult returns a completed job's result, decoded and validated.
func fetchResult(ctx context.Context, cl *client.Client, scope string, j *evalrecord.Job) (*evalengine.Result, error) {
	if j.Phase != evalrecord.PhaseCompleted {
		return nil, &cliError{Code: codeEvaluationFailed, Reason: string(j.Phase), Detail: "job " + j.JobID + ": " + j.Reason}
	}
	data, err := cl.Result(ctx, scope, j.JobID)
	if err != nil {
		return nil, serviceError(err)
	}
	r, err := evalengine.DecodeResult(data)
	if err != nil {
		return nil, engineError(codeInvalidEvalReportInput, err)
	}
	return r, nil
}

// extendEvalRun adds --cluster and --agent to `eval run`: with --cluster
// the run is a job on the cluster, owned by this process, with the same
// report and exit code a local run gives.
func extendEvalRun(run *cobra.Command) {
	var cf clusterFlags
	var agentName string
	cf.register(run)
	run.Flags().StringVar(&agentName, "agent", "", "with --cluster: the agent name the cluster's workers are configured with")
	local := run.RunE
	run.RunE = func(cmd *cobra.Command, args []string) error {
		if cf.url == "" {
			if agentName != "" {
				return usageError{errors.New("--agent needs --cluster (a local run takes --config)")}
			}
			return local(cmd, args)
		}
		return runEvalOnCluster(cmd, &cf, agentName)
	}
	run.Use = "run (--config AGENT.json | --agent-url URL | --cluster URL --agent NAME) --eval-set SET.json [flags]"
}

// runFlagsOf reads `eval run`'s string flags back by name.
func runFlagsOf(cmd *cobra.Command) *evalRunFlags {
	get := func(name string) string {
		v, _ := cmd.Flags().GetString(name)
		return v
	}
	return &evalRunFlags{
		config: get("config"), agentURL: get("agent-url"), evalSet: get("eval-set"), criteria: get("criteria"), baseline: get("baseline"),
		tolerances: get("metric-tolerances"), judgeConfig: get("judge-config"), format: get("format"),
		output: get("output"), suiteName: get("suite-name"), samples: get("samples"), concurrency: get("concurrency"),
		sampleConcurrency: get("sample-concurrency"), timeout: get("timeout"), caseTimeout: get("case-timeout"),
		passRate: get("pass-rate-threshold"), samplePassRate: get("sample-pass-rate-threshold"),
		minSuccessful: get("min-successful-samples"), maxReportBytes: get("max-report-bytes"),
		emptyCriteria: get("empty-criteria"), captureEvents: get("capture-events"),
		captureToolContent: get("capture-tool-content"), maxPassRateDrop: get("max-pass-rate-drop"),
	}
}

func runEvalOnCluster(cmd *cobra.Command, cf *clusterFlags, agentName string) error {
	f := runFlagsOf(cmd)
	if f.config != "" {
		return usageError{errors.New("--config is local: a cluster runs the agents its workers are configured with (--agent)")}
	}
	if f.agentURL != "" {
		return usageError{errors.New("--agent-url is local: a cluster runs the agents its workers are configured with (--agent)")}
	}
	if f.judgeConfig != "" {
		return usageError{errors.New("--judge-config is local: a cluster's judges are the workers' own")}
	}
	opts, cmpOpts, err := f.validate()
	if err != nil {
		return err
	}
	job, err := prepareClusterJob(agentName, f.evalSet, f.criteria, opts)
	if err != nil {
		return err
	}
	baseline, err := f.loadBaseline(&cmpOpts)
	if err != nil {
		return err
	}
	cl, done, err := cf.client()
	if err != nil {
		return err
	}
	defer done()
	j, err := runOwnedJob(cmd, cl, cf.scope, job)
	if err != nil {
		return err
	}
	result, err := fetchResult(cmd.Context(), cl, cf.scope, j)
	if err != nil {
		return err
	}
	return f.report(cmd, result, baseline, cmpOpts, opts, nil)
}

// extendEvalReport lets `eval report JOB_ID --cluster URL` render a
// cluster job's stored result.
func extendEvalReport(report *cobra.Command) {
	var cf clusterFlags
	cf.register(report)
	local := report.RunE
	report.RunE = func(cmd *cobra.Command, args []string) error {
		if cf.url == "" {
			return local(cmd, args)
		}
		get := func(name string) string {
			v, _ := cmd.Flags().GetString(name)
			return v
		}
		format, output := get("format"), get("output")
		if err := checkFormat(format); err != nil {
			return err
		}
		if err := checkOutputPath(output); err != nil {
			return err
		}
		cl, done, err := cf.client()
		if err != nil {
			return err
		}
		defer done()
		j, err := cl.Status(cmd.Context(), cf.scope, args[0])
		if err != nil {
			return serviceError(err)
		}
		result, err := fetchResult(cmd.Context(), cl, cf.scope, j)
		if err != nil {
			return err
		}
		rendered, err := evalengine.Render(result, format, evalengine.ExportOptions{SuiteName: get("suite-name")})
		if err != nil {
			return engineError(codeReportRenderFailed, err)
		}
		return emitReport(cmd.OutOrStdout(), output, rendered)
	}
	report.Use = "report (RESULT.json | JOB_ID --cluster URL)"
}
