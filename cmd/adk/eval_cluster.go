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
	"slices"
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
// the CLI stops renewing for ownerTTL. Short, so a killed CLI's job stops
// calling its provider within ~2.5 s (the leader cancels at the lapse and
// pushes the kills to the workers at once); five renewals fit in it, so
// a loaded machine delaying one or two does not lose the job.
const (
	ownerTTL       = 2 * time.Second
	ownerRenew     = 400 * time.Millisecond
	statusInterval = 200 * time.Millisecond
)

// natsFlags are the NATS connection flags of every command that connects:
// one URL flag, --nats (default $ADK_CLUSTER), and one credentials set,
// --nats-creds, --nats-nkey, --nats-user (password from
// $ADK_NATS_PASSWORD). Older spellings stay as hidden aliases: --cluster
// (eval commands), --server (store, trace) and --creds (store).
type natsFlags struct {
	url, creds, nkey, user string
}

// natsURLAliases are the hidden old names of --nats.
var natsURLAliases = []string{"cluster", "server"}

// register adds the flags; def is the URL when neither --nats nor
// $ADK_CLUSTER gives one ("" makes --nats required).
func (f *natsFlags) register(fs *pflag.FlagSet, def string) {
	help := "NATS URL(s), comma separated (default $" + envCluster
	if def != "" {
		help += ", else " + def
	}
	help += ")"
	d := envDefault(envCluster, def)
	fs.StringVar(&f.url, "nats", d, help)
	fs.Lookup("nats").DefValue = def
	for _, alias := range natsURLAliases {
		fs.StringVar(&f.url, alias, d, "old name of --nats")
		_ = fs.MarkHidden(alias)
	}
	fs.StringVar(&f.creds, "nats-creds", "", "NATS credentials file (JWT + nkey)")
	fs.StringVar(&f.creds, "creds", "", "old name of --nats-creds")
	_ = fs.MarkHidden("creds")
	fs.StringVar(&f.nkey, "nats-nkey", "", "NATS nkey seed file")
	fs.StringVar(&f.user, "nats-user", "", "NATS user; the password is read from $"+envNATSPassword)
}

// changed reports whether the URL was given on the command line (under any
// of its names).
func (f *natsFlags) changed(fs *pflag.FlagSet) bool {
	for _, n := range append([]string{"nats"}, natsURLAliases...) {
		if fs.Changed(n) {
			return true
		}
	}
	return false
}

// busOptions are the credentials as bus options.
func (f *natsFlags) busOptions() []bus.Option {
	switch {
	case f.creds != "":
		return []bus.Option{bus.WithCredsFile(f.creds)}
	case f.nkey != "":
		return []bus.Option{bus.WithNkeySeedFile(f.nkey)}
	case f.user != "":
		return []bus.Option{bus.WithUserPassword(f.user, os.Getenv(envNATSPassword))}
	}
	return nil
}

// connect dials NATS with the configured credentials. bus.Connect scrubs
// URL credentials from its errors.
func (f *natsFlags) connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	if f.url == "" {
		return nil, &cliError{Code: codeMissingRequired, Reason: "--nats", Detail: "the NATS URL of the cluster, or set $" + envCluster}
	}
	opts := append([]bus.Option{bus.WithName(name), bus.WithConnectTimeout(5 * time.Second)}, f.busOptions()...)
	if len(extra) > 0 {
		opts = append(opts, bus.WithNATSOptions(extra...))
	}
	nc, err := bus.Connect(f.url, opts...)
	if err != nil {
		return nil, &cliError{Code: codeClusterUnavailable, Detail: err.Error(), Err: err}
	}
	return nc, nil
}

// defaultNATSURL is the URL of the commands that default to a local
// `adk serve` (store, trace).
const defaultNATSURL = "nats://127.0.0.1:4222"

// dial connects like bus.Connect does for the trace commands (their errors
// are bus's own), with the credentials flags applied.
func (f *natsFlags) dial(extra ...bus.Option) (*nats.Conn, error) {
	return bus.Connect(f.url, append(f.busOptions(), extra...)...)
}

// clusterFlags are what every cluster eval command takes.
type clusterFlags struct {
	natsFlags
	scope   string
	timeout time.Duration
}

func (f *clusterFlags) register(cmd *cobra.Command) {
	f.natsFlags.register(cmd.Flags(), "")
	cmd.Flags().StringVar(&f.scope, "scope", "default", "app scope of the jobs")
	cmd.Flags().DurationVar(&f.timeout, "request-timeout", 30*time.Second, "timeout of one service call")
}

func (f *clusterFlags) client() (*client.Client, func(), error) {
	nc, err := f.connect("adk-cli")
	if err != nil {
		return nil, nil, err
	}
	return client.New(nc, f.timeout), nc.Close, nil
}

// liveAgents asks the cluster which agents its live workers offer.
func liveAgents(ctx context.Context, cl *client.Client) ([]string, error) {
	caps, err := cl.Capabilities(ctx)
	if err != nil {
		return nil, serviceError(err)
	}
	return caps.Agents, nil
}

// agentWait is how long checkClusterAgent waits for an agent to appear: a
// worker that just started announces its agents with its first heartbeat
// (every second by default), so a fleet started a moment ago is not
// mistaken for one without the agent.
const agentWait = 3 * time.Second

// checkClusterAgent refuses, before anything is submitted, an agent no
// live worker offers, naming the ones they do.
func checkClusterAgent(ctx context.Context, cl *client.Client, agent string) error {
	deadline := time.Now().Add(agentWait)
	for {
		agents, err := liveAgents(ctx, cl)
		if err != nil {
			return err
		}
		if slices.Contains(agents, agent) {
			return nil
		}
		if time.Now().After(deadline) {
			detail := "no live worker offers an agent"
			if len(agents) > 0 {
				detail = "live workers offer: " + strings.Join(agents, ", ")
			}
			return &cliError{Code: api.CodeUnknownAgent, Reason: agent, Detail: detail}
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return &cliError{Code: codeEvaluationFailed, Reason: "interrupted"}
		case <-t.C:
		}
	}
}

// completeAgents completes --agent with the agents the cluster's live
// workers offer (nothing when the cluster cannot be reached).
func (f *clusterFlags) completeAgents(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	if f.url == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cl, done, err := f.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer done()
	ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
	defer cancel()
	agents, _ := liveAgents(ctx, cl)
	return agents, cobra.ShellCompDirectiveNoFileComp
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

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// newJobCmd builds a `JOB_ID --nats URL` command: it connects, runs do
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
	return newJobCmd("status JOB_ID [--nats URL]", "Show a cluster job's phase and progress (JSON)",
		func(cmd *cobra.Command, cl *client.Client, scope, id string) error {
			j, err := cl.Status(cmd.Context(), scope, id)
			if err != nil {
				return serviceError(err)
			}
			return writeJSON(cmd.OutOrStdout(), j)
		})
}

func newEvalResultCmd() *cobra.Command {
	return newJobCmd("result JOB_ID [--nats URL]", "Print a completed cluster job's result document (JSON)",
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
	return newJobCmd("cancel JOB_ID [--nats URL]", "Cancel a queued or running cluster job",
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
		Use:   "jobs [--nats URL]",
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
	skipped []string // conversation_scenario cases left out
}

func prepareClusterJob(agentName, setPath, criteriaPath string, opts evalengine.Options) (*clusterJob, error) {
	var missing []string
	if agentName == "" {
		missing = append(missing, "--agent")
	}
	if setPath == "" {
		missing = append(missing, "--eval-set")
	}
	if len(missing) > 0 {
		return nil, &cliError{Code: codeMissingRequired, Reason: strings.Join(missing, ",")}
	}
	set, _, err := loadEvalSetFormat(setPath)
	if err != nil {
		return nil, err
	}
	// A cluster simulates no users: conversation_scenario cases are left
	// out and reported not_evaluated.
	var skipped []string
	set, skipped = evalengine.WithoutScenarioCases(set)
	// The canonical schema-2 document: the cluster sees exactly the set
	// a local run would (a Google ADK file's derived ids included).
	setDoc, err := evalengine.EncodeSet(set)
	if err != nil {
		return nil, engineError(evalengine.CodeInvalidEvalSet, err)
	}
	j := &clusterJob{agent: agentName, set: set, opts: opts, skipped: skipped}
	j.req = api.SubmitRequest{Set: setDoc, Agent: agentName}
	// The job's result lists them, as a local run's does, whichever way
	// it is read (jsonl stream, document, eval report JOB_ID).
	for _, id := range skipped {
		j.req.NotEvaluated = append(j.req.NotEvaluated, evalrecord.NotEvaluated{CaseID: id, Reason: evalengine.NotEvaluatedUserSimulator})
	}
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
	f := newEvalRunFlags()
	var detach bool
	cmd := &cobra.Command{
		Use:   "submit --agent NAME --eval-set SET.json [--nats URL] [flags]",
		Short: "Submit an eval job to a cluster; print the job (JSON)",
		Long: `Submit a job and print it. With --detach the cluster owns the job and the
command returns at once; without, this process is the job's owner: it
renews its owner lease until the job ends (Ctrl-C cancels the job) and
prints the final job. An agent no live worker offers is refused (exit 1)
before anything is submitted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			job, err := prepareClusterJob(f.agentName, f.evalSet, f.criteria, opts)
			if err != nil {
				return err
			}
			cl, done, err := f.cluster.client()
			if err != nil {
				return err
			}
			defer done()
			if err := checkClusterAgent(cmd.Context(), cl, job.agent); err != nil {
				return err
			}
			if detach {
				j, err := cl.Submit(cmd.Context(), f.cluster.scope, job.req)
				if err != nil {
					return serviceError(err)
				}
				return writeJSON(cmd.OutOrStdout(), j)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			j, err := runOwnedJob(ctx, cmd, cl, f.cluster.scope, job)
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), j)
		},
	}
	f.cluster.register(cmd)
	f.registerJob(cmd)
	cmd.Flags().BoolVar(&detach, "detach", false, "return after submitting; the cluster owns the job")
	return cmd
}

// runOwnedJob submits a job owned by this process, renews the owner lease
// while it waits, shows progress on a terminal, and cancels the job when
// interrupted. It returns the terminal job.
func runOwnedJob(ctx context.Context, cmd *cobra.Command, cl *client.Client, scope string, job *clusterJob) (*evalrecord.Job, error) {
	owner := newOwnerID()
	lease, err := cl.KeepOwner(owner, ownerRenew)
	if err != nil {
		return nil, err
	}
	defer lease.Stop()
	job.req.Owner, job.req.OwnerTTLMS = owner, ownerTTL.Milliseconds()
	j, err := cl.Submit(ctx, scope, job.req)
	if err != nil {
		return nil, serviceError(err)
	}
	p := newClusterProgress(progressWriter(cmd), j.JobID)
	defer p.end()
	for !j.Phase.Terminal() {
		// The coordinator holds the status until the job ends or
		// statusInterval passed, so the end shows at once; one of an
		// earlier build answers at once, and pace keeps the calls
		// statusInterval apart.
		pace := time.NewTimer(statusInterval)
		next, err := cl.StatusWait(ctx, scope, j.JobID, statusInterval)
		if err == nil && next.Phase.Terminal() {
			pace.Stop()
			return next, nil
		}
		if err == nil {
			j = next
			p.update(j)
		} else if ctx.Err() == nil {
			pace.Stop()
			return nil, serviceError(err)
		}
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
		case <-pace.C:
		}
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
