package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/internal/jsonlimit"
	"github.com/fadcedab/adk/store/evalrecord"
)

// Config file error codes of `adk coordinator` and `adk worker`.
const (
	codeInvalidCoordinatorConfig = "invalid_coordinator_config"
	codeInvalidWorkerConfig      = "invalid_worker_config"
)

// coordinatorFile is the optional JSON config of `adk coordinator` (at
// most 1 MiB, internal/jsonlimit, unknown keys refused). Flags override it
// key by key; a relative data_dir is relative to the file. Credentials
// never go in it: use --nats-creds and friends.
type coordinatorFile struct {
	ID           string   `json:"id"`
	NATS         string   `json:"nats"`
	DataDir      string   `json:"data_dir"`
	RaftAddr     string   `json:"raft_addr"`
	Bootstrap    bool     `json:"bootstrap"`
	Join         bool     `json:"join"`
	Peers        []string `json:"peers"` // id=raft-address
	Workers      []string `json:"workers"`
	Coordinators []string `json:"coordinators"`
	Replicas     int      `json:"replicas"`
	LogLevel     string   `json:"log_level"`
}

// coordinatorOptions configure `adk coordinator`.
type coordinatorOptions struct {
	nats         natsFlags
	configFile   string
	id           string
	dataDir      string
	raftAddr     string
	bootstrap    bool
	join         bool
	peers        []string
	workers      []string
	coordinators []string
	replicas     int
	logLevel     string
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

--config FILE reads {"id", "nats", "data_dir", "raft_addr", "bootstrap",
"join", "peers": ["id=addr"], "workers", "coordinators", "replicas",
"log_level"} instead (flags override it; a relative data_dir is relative to
the file).`,
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
			stopProfile, err := startCPUProfile(envCoordinatorCPUProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			return runCoordinator(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	o.nats.register(fl, "")
	fl.StringVar(&o.configFile, "config", "", "coordinator config file (JSON, at most 1 MiB)")
	fl.StringVar(&o.id, "id", "", "node id (Raft server id), a subject token (required)")
	fl.StringVar(&o.dataDir, "data-dir", "", "directory for the Raft log, snapshots and the eval store (required)")
	fl.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:7100", "Raft TCP address: bound here and advertised to peers")
	fl.BoolVar(&o.bootstrap, "bootstrap", false, "bootstrap a new cluster (with --peers: all voters)")
	fl.BoolVar(&o.join, "join", false, "join the running cluster reached through --nats")
	fl.StringSliceVar(&o.peers, "peers", nil, "voters of a new cluster, id=raft-address (with --bootstrap)")
	fl.StringSliceVar(&o.workers, "workers", nil, "allowlisted worker ids (required)")
	fl.StringSliceVar(&o.coordinators, "coordinators", nil, "coordinator ids allowed to --join while this node leads")
	fl.IntVar(&o.replicas, "replicas", 1, "replicas of the ADK_TASKS and ADK_RESULTS streams (1 or 3)")
	fl.StringVar(&o.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	return cmd
}

// readConfigFile decodes a bounded, closed JSON config file into v: at
// most 1 MiB, internal/jsonlimit's limits, unknown keys refused. Errors
// carry the jsonlimit code and the offending key, never a value.
func readConfigFile(name, code, path string, v any) error {
	data, err := readCapped(name, path, maxConfigFileBytes)
	if err != nil {
		return err
	}
	if err := jsonlimit.Unmarshal(data, jsonlimit.Limits{MaxBytes: maxConfigFileBytes}, v); err != nil {
		reason := jsonlimit.ErrorCode(err)
		if reason == "" {
			reason = "invalid_json"
		}
		detail := ""
		var je *jsonlimit.Error
		if errors.As(err, &je) {
			detail = je.Key
			if detail == "" && je.Path != "$" {
				detail = je.Path
			}
		}
		return &cliError{Code: code, Reason: reason, Detail: detail, Err: err}
	}
	return nil
}

// resolve merges --config under the flags: a flag given on the command
// line wins, a file key fills a flag left at its default.
func (o *coordinatorOptions) resolve(changed func(flag string) bool) error {
	if o.configFile == "" {
		return nil
	}
	var f coordinatorFile
	if err := readConfigFile("config", codeInvalidCoordinatorConfig, o.configFile, &f); err != nil {
		return err
	}
	if f.DataDir != "" && !filepath.IsAbs(f.DataDir) {
		f.DataDir = filepath.Join(filepath.Dir(o.configFile), f.DataDir)
	}
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
	str("id", &o.id, f.ID)
	str("nats", &o.nats.url, f.NATS)
	str("data-dir", &o.dataDir, f.DataDir)
	str("raft-addr", &o.raftAddr, f.RaftAddr)
	str("log-level", &o.logLevel, f.LogLevel)
	list("peers", &o.peers, f.Peers)
	list("workers", &o.workers, f.Workers)
	list("coordinators", &o.coordinators, f.Coordinators)
	if !changed("bootstrap") {
		o.bootstrap = f.Bootstrap
	}
	if !changed("join") {
		o.join = f.Join
	}
	if !changed("replicas") && f.Replicas != 0 {
		o.replicas = f.Replicas
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
		Workers: o.workers, Coordinators: o.coordinators, Streams: bus.TaskStreamConfig{Replicas: o.replicas}}
	for _, p := range o.peers {
		id, addr, ok := strings.Cut(p, "=")
		if !ok || id == "" || addr == "" {
			return cfg, usageError{fmt.Errorf("--peers entry %q is not id=address", p)}
		}
		cfg.Peers = append(cfg.Peers, coordinator.Peer{ID: id, Addr: addr})
	}
	return cfg, nil
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level %q", level)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
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
	if cfg.Logger, err = newLogger(stderr, o.logLevel); err != nil {
		return err
	}
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
	fmt.Fprintf(stdout, "adk coordinator %s: raft %s, data %s, workers %s\n", o.id, n.RaftAddr(), o.dataDir, strings.Join(o.workers, ","))
	<-ctx.Done()
	return nil
}
