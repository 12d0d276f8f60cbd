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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/settings"
	"github.com/fadcedab/adk/store/evalrecord"
)

// coordinatorOptions configure `adk coordinator`: identity flags, and the
// settings (--config and the common keys' flags) for the rest.
type coordinatorOptions struct {
	nats         natsFlags
	set          *settings.Flags
	id           string
	dataDir      string
	raftAddr     string
	bootstrap    bool
	join         bool
	peers        []string
	workers      []string
	coordinators []string
	replicas     int
	// file is the resolved settings (defaults < file < flags).
	file settings.File
	ops  opsFlags
	// listen is --tls-cert, --tls-key and --insecure-listen of
	// --metrics-addr.
	listen listenFlags
}

func newCoordinatorCmd() *cobra.Command {
	var o coordinatorOptions
	cmd := &cobra.Command{
		Use:   "coordinator --id ID --data-dir DIR --raft-addr HOST:PORT --nats URL (--bootstrap [--peers id=addr,...] | --join) --workers w1,w2 [--coordinators c1,c2,c3] [--config FILE]",
		Short: "Run one Raft coordinator of an eval cluster until SIGINT/SIGTERM",
		Long: `coordinator runs one voter of the eval cluster's Raft group against an
external NATS (JetStream) cluster: the adk.coord.v1 service, and, while it
leads, the scheduler that dispatches tasks to the allowlisted workers.

A new cluster is bootstrapped once: either every node with --bootstrap and
the same --peers list (id=raft-address for each voter, this node included),
or one node with --bootstrap alone (a single-voter cluster) that others then
--join. A joining node asks the running cluster over NATS
(adk.coord.v1.join) to add it as a voter, retrying until it is a member; the
leader admits only the ids on its --coordinators allowlist (plus its own id
and its --peers). --raft-addr is the address peers dial, so it must be
reachable from them (not 0.0.0.0). A restarted node ignores --bootstrap and
--join and resumes from --data-dir; stopping a node does not remove it from
the cluster.

--config FILE reads the settings file (adk config defaults prints every
key): the "coordinator" section holds these flags' keys ("id", "nats",
"data_dir", "raft_addr", "bootstrap", "join", "peers": ["id=addr"],
"workers", "coordinators", "replicas") and the job service's limits
(admission, timeouts, eval-store quotas), "log" the log level and format.
Flags win over the file; a relative data_dir is relative to the file.

--result-tails (coordinator.result_tails, $ADK_COORDINATOR_RESULT_TAILS)
says when this node renders a completed job's result tail, which serves
its case pages without decoding its samples: completion (the default:
every node, read or not, ~0.6 s of CPU per 10,000 cases), first_read
(the first read of the job on this node pays the decode, later reads and
restarts use the tail), or never (every read that finds no tail decodes
the job's samples, as before tails existed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			changed := func(name string) bool {
				if name == "nats" {
					return o.nats.changed(cmd.Flags())
				}
				return cmd.Flags().Changed(name)
			}
			if err := o.resolve(changed); err != nil {
				return err
			}
			stopProfile, err := startNodeProfiles(envCoordinatorCPUProfile, envCoordinatorHeapProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			return runCoordinator(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	registerCoordinatorFlags(cmd.Flags(), &o)
	return cmd
}

// registerCoordinatorFlags registers `adk coordinator`'s flags into o.
func registerCoordinatorFlags(fl *pflag.FlagSet, o *coordinatorOptions) {
	o.nats.register(fl, "")
	o.set = settings.Bind(fl, "log.level", "log.format", "coordinator.max_running_jobs", "coordinator.max_queued_jobs",
		"coordinator.max_queued_bytes", "coordinator.task_timeout", "coordinator.job_timeout", "coordinator.result_tails")
	fl.StringVar(&o.id, "id", "", "node id (Raft server id), a subject token (required)")
	fl.StringVar(&o.dataDir, "data-dir", "", "directory for the Raft log, snapshots and the eval store (required)")
	fl.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:7100", "Raft TCP address: bound here and advertised to peers")
	fl.BoolVar(&o.bootstrap, "bootstrap", false, "bootstrap a new cluster (with --peers: all voters)")
	fl.BoolVar(&o.join, "join", false, "join the running cluster reached through --nats")
	fl.StringSliceVar(&o.peers, "peers", nil, "voters of a new cluster, id=raft-address (with --bootstrap)")
	fl.StringSliceVar(&o.workers, "workers", nil, "allowlisted worker ids (required)")
	fl.StringSliceVar(&o.coordinators, "coordinators", nil, "coordinator ids allowed to --join while this node leads")
	fl.IntVar(&o.replicas, "replicas", 1, "replicas of the ADK_TASKS and ADK_RESULTS streams (1 or 3)")
	o.ops.register(fl)
	o.listen.register(fl)
	o.ops.link(o.set, coordinatorListen)
	o.listen.link(o.set, coordinatorListen)
}

// settingsError turns a refused settings key into the CLI's one-line
// error: invalid_settings: KEY (what is valid).
func settingsError(err error) error {
	var se *settings.Error
	if errors.As(err, &se) {
		return &cliError{Code: settings.Code, Reason: se.Key, Detail: se.Reason, Err: err}
	}
	return err
}

// resolve merges the settings (defaults < --config < settings flags) and
// fills the identity flags left at their defaults from the file's
// coordinator section: a flag given on the command line wins.
func (o *coordinatorOptions) resolve(changed func(flag string) bool) error {
	f, err := o.set.Resolve()
	if err != nil {
		return settingsError(err)
	}
	o.file = f
	c := f.Coordinator
	o.ops.load(c.Listen)
	o.listen.load(c.Listen)
	str := func(flag string, dst *string, v string) {
		if !changed(flag) && v != "" {
			*dst = v
		}
	}
	list := func(flag string, dst *[]string, v []string) {
		if !changed(flag) && v != nil {
			*dst = v
		}
	}
	str("id", &o.id, c.ID)
	str("nats", &o.nats.url, c.NATS)
	str("data-dir", &o.dataDir, c.DataDir)
	str("raft-addr", &o.raftAddr, c.RaftAddr)
	list("peers", &o.peers, c.Peers)
	list("workers", &o.workers, c.Workers)
	list("coordinators", &o.coordinators, c.Coordinators)
	if !changed("bootstrap") {
		o.bootstrap = o.bootstrap || c.Bootstrap
	}
	if !changed("join") {
		o.join = o.join || c.Join
	}
	if !changed("replicas") && o.set.ConfigPath() != "" {
		o.replicas = c.Replicas
	}
	return nil
}

func (o *coordinatorOptions) config() (coordinator.Config, error) {
	var missing []string
	for _, m := range []struct{ name, v string }{{"--id", o.id}, {"--data-dir", o.dataDir}} {
		if m.v == "" {
			missing = append(missing, m.name)
		}
	}
	if len(o.workers) == 0 {
		missing = append(missing, "--workers")
	}
	if len(missing) > 0 {
		return coordinator.Config{}, &cliError{Code: codeMissingRequired, Reason: strings.Join(missing, ",")}
	}
	if len(o.peers) > 0 && !o.bootstrap {
		return coordinator.Config{}, usageError{errors.New("--peers needs --bootstrap")}
	}
	if o.join && o.bootstrap {
		return coordinator.Config{}, usageError{errors.New("--join and --bootstrap exclude each other: a cluster is bootstrapped once, then joined")}
	}
	if o.replicas != 1 && o.replicas != 3 {
		return coordinator.Config{}, usageError{errors.New("--replicas must be 1 or 3")}
	}
	if err := bus.ValidToken(o.id); err != nil {
		return coordinator.Config{}, usageError{fmt.Errorf("--id: %v", err)}
	}
	for _, c := range o.coordinators {
		if err := bus.ValidToken(c); err != nil {
			return coordinator.Config{}, usageError{fmt.Errorf("--coordinators %q: %v", c, err)}
		}
	}
	cfg := coordinator.Config{ID: o.id, DataDir: o.dataDir, RaftAddr: o.raftAddr, Bootstrap: o.bootstrap, Join: o.join,
		Workers: o.workers, Coordinators: o.coordinators, Streams: bus.TaskStreamConfig{Replicas: o.replicas},
		Limits: o.file.Coordinator.Limits(), StoreLimits: o.file.Coordinator.StoreLimits(), ResultTails: o.file.Coordinator.Tails()}
	// On an external NATS server the leader creates ADK_SIGNALS (adk serve
	// creates its own): workers trace into it and store nodes read it.
	signals := o.file.Signals.StreamConfig()
	cfg.Signals = &signals
	for _, p := range o.peers {
		id, addr, ok := strings.Cut(p, "=")
		if !ok || id == "" || addr == "" {
			return cfg, usageError{fmt.Errorf("--peers entry %q is not id=address", p)}
		}
		cfg.Peers = append(cfg.Peers, coordinator.Peer{ID: id, Addr: addr})
	}
	return cfg, nil
}

// coordinatorStartError gives a failed start its typed code first: a held
// data dir is `eval_store_already_owned (...)`, a refused join
// `coordinator_join_not_allowed` or `coordinator_member_conflict`.
func coordinatorStartError(err error) error {
	var se *evalrecord.Error
	if errors.As(err, &se) {
		return &cliError{Code: se.Code, Detail: se.Detail, Err: err}
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return &cliError{Code: ae.Code, Detail: ae.Detail, Err: err}
	}
	return fmt.Errorf("start coordinator: %w", err)
}

// runCoordinator runs until ctx ends, then stops the node (service, leader
// loop, Raft, stores) and closes its connection. With --join, starting
// lasts until the node is a member (or ctx ends).
func runCoordinator(ctx context.Context, o coordinatorOptions, stdout, stderr io.Writer) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	cfg.Logger = o.file.Log.Logger(stderr)
	nc, err := o.nats.connect("adk-coordinator-" + o.id)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg.NATS = nc
	n, err := coordinator.StartContext(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil && cfg.Join {
			return nil // interrupted while joining
		}
		return coordinatorStartError(err)
	}
	defer n.Stop()
	reg := devapi.NewRegistry()
	register(reg, coordinatorCollectors(n))
	stopOps, err := o.ops.start(&o.listen, reg, func(context.Context) error { return n.Ready() }, stdout, "adk coordinator "+o.id)
	if err != nil {
		return err
	}
	defer stopOps()
	fmt.Fprintf(stdout, "adk coordinator %s: raft %s, data %s, workers %s\n", o.id, n.RaftAddr(), o.dataDir, strings.Join(o.workers, ","))
	select {
	case <-ctx.Done():
		return nil
	case err := <-n.Fatal():
		// Fail closed: the service stopped itself (CONTRACTS §6); the
		// process exits with the typed reason.
		return err
	}
}
