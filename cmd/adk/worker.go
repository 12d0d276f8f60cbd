package main

import (
	"context"
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

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/cmd/adk/internal/evalheap"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/settings"
	"github.com/fadcedab/adk/worker"
)

// workerOptions configure `adk worker`: identity and agent flags, and the
// settings (--config, --capacity, --log-level, --log-format).
type workerOptions struct {
	nats   natsFlags
	set    *settings.Flags
	id     string
	agents []string
	drain  time.Duration
	ops    opsFlags
	listen listenFlags
}

// maxWorkerCapacity bounds a worker's capacity.
const maxWorkerCapacity = settings.MaxWorkerCapacity

func newWorkerCmd() *cobra.Command {
	var o workerOptions
	cmd := &cobra.Command{
		Use:   "worker --id ID --nats URL --capacity N --agent NAME=AGENT.json ...",
		Short: "Run an eval worker until SIGINT/SIGTERM",
		Long: `worker runs the tasks the cluster dispatches to its id, with the agents it
is configured with: each --agent NAME=AGENT.json is parsed once at start; a
job only names the agent. --config FILE reads the settings file (adk config
defaults prints every key): its "worker" section holds "id", "nats",
"capacity" and "agents": {NAME: PATH} (relative to the file), "log" the log
level and format. Flags win over the file; --agent flags replace the file's
agents as a whole.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			stopProfile, err := startNodeProfiles(envWorkerCPUProfile, envWorkerHeapProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			return runWorker(ctx, cmd, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	o.nats.register(fl, "")
	o.set = settings.Bind(fl, "worker.capacity", "log.level", "log.format")
	o.ops.register(fl)
	o.listen.register(fl)
	o.ops.link(o.set, workerListen)
	o.listen.link(o.set, workerListen)
	fl.StringVar(&o.id, "id", "", "worker id: its NATS user and task subject token (required)")
	fl.StringArrayVar(&o.agents, "agent", nil, "trusted agent NAME=AGENT.json (repeatable)")
	fl.DurationVar(&o.drain, "trace-drain", defaultTraceDrain, "at exit, wait at most this long for task traces to be published (1ms..5m)")
	return cmd
}

// parseAgentFlags turns NAME=PATH flags into a map; a name given twice is
// an error.
func parseAgentFlags(flags []string, into map[string]string) error {
	for _, a := range flags {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" {
			return usageError{fmt.Errorf("--agent %q is not NAME=AGENT.json", a)}
		}
		if _, dup := into[name]; dup {
			return usageError{fmt.Errorf("agent %q given twice", name)}
		}
		into[name] = path
	}
	return nil
}

func (o *workerOptions) resolve(cmd *cobra.Command) (settings.File, settings.Worker, error) {
	f, err := o.set.Resolve()
	if err != nil {
		return f, f.Worker, settingsError(err)
	}
	wf := f.Worker
	o.ops.load(wf.Listen)
	o.listen.load(wf.Listen)
	if cmd.Flags().Changed("id") || wf.ID == "" {
		wf.ID = o.id
	}
	if o.nats.changed(cmd.Flags()) || wf.NATS == "" {
		wf.NATS = o.nats.url
	}
	if len(o.agents) > 0 {
		// Flags replace the file's agents as a whole.
		wf.Agents = map[string]string{}
		if err := parseAgentFlags(o.agents, wf.Agents); err != nil {
			return f, wf, err
		}
	}
	var missing []string
	if wf.ID == "" {
		missing = append(missing, "--id")
	}
	if wf.NATS == "" {
		missing = append(missing, "--nats")
	}
	if len(wf.Agents) == 0 {
		missing = append(missing, "--agent")
	}
	if len(missing) > 0 {
		return f, wf, &cliError{Code: codeMissingRequired, Reason: strings.Join(missing, ",")}
	}
	if err := bus.ValidToken(wf.ID); err != nil {
		return f, wf, usageError{fmt.Errorf("--id: %v", err)}
	}
	return f, wf, nil
}

// runWorker runs until ctx ends, then stops the worker (its tasks are
// killed; the coordinator fails them) and closes its connection.
func runWorker(ctx context.Context, cmd *cobra.Command, o workerOptions, stdout, stderr io.Writer) error {
	f, wf, err := o.resolve(cmd)
	if err != nil {
		return err
	}
	log := f.Log.Logger(stderr)
	// A long-running worker's heap goal stays at a floor (gcfloor.go),
	// in a range of the heap backed by huge pages: the floor's first
	// touches cost a page fault per 2 MiB, not per 4 KiB.
	evalheap.Ready()
	defer holdGCFloor()()
	o.nats.url = wf.NATS
	nc, err := o.nats.connect("adk-worker-"+wf.ID, nats.CustomInboxPrefix(bus.WorkerInboxPrefix(wf.ID)))
	if err != nil {
		return err
	}
	defer nc.Close()
	tracing, err := startFleetTracing(nc, os.Getenv, "adk-worker", o.drain, log, f.Log.SignalWarnInterval.D(), "adk worker "+wf.ID)
	if err != nil {
		return err
	}
	defer tracing.finish(stderr)
	wc := worker.Config{ID: wf.ID, NATS: nc, Capacity: wf.Capacity, AgentFiles: wf.Agents, Logger: log}
	tracing.workerConfig(&wc)
	w, err := worker.Start(wc)
	if err != nil {
		var ce *cliError
		if errors.As(err, &ce) {
			return err
		}
		return &cliError{Code: codeInvalidAgentConfig, Detail: err.Error(), Err: err}
	}
	defer w.Stop()
	reg := devapi.NewRegistry()
	register(reg, workerCollectors(w))
	stopOps, err := o.ops.start(&o.listen, reg, func(context.Context) error {
		if !nc.IsConnected() {
			return errors.New("not connected to NATS")
		}
		if w.Fenced() {
			return errors.New("fenced: no heartbeat answer from a leader")
		}
		return nil
	}, stdout, "adk worker "+wf.ID)
	if err != nil {
		return err
	}
	defer stopOps()
	names := make([]string, 0, len(wf.Agents))
	for n := range wf.Agents {
		names = append(names, n)
	}
	fmt.Fprintf(stdout, "adk worker %s: capacity %d, %d agent(s)\n", wf.ID, wf.Capacity, len(names))
	<-ctx.Done()
	return nil
}
