package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
)

// coordinatorOptions configure `adk coordinator`.
type coordinatorOptions struct {
	nats      natsFlags
	id        string
	dataDir   string
	raftAddr  string
	bootstrap bool
	peers     []string
	workers   []string
	replicas  int
	logLevel  string
}

func newCoordinatorCmd() *cobra.Command {
	var o coordinatorOptions
	cmd := &cobra.Command{
		Use:   "coordinator --id ID --data-dir DIR --raft-addr HOST:PORT --nats URL [--bootstrap [--peers id=addr,...]] --workers w1,w2",
		Short: "Run one Raft coordinator of an eval cluster until SIGINT/SIGTERM",
		Long: `coordinator runs one voter of the eval cluster's Raft group against an
external NATS (JetStream) cluster: the adk.coord.v1 service, and, while it
leads, the scheduler that dispatches tasks to the allowlisted workers.

A new cluster is bootstrapped once: either one node with --bootstrap (a
single-voter cluster), or every node with --bootstrap and the same --peers
list (id=raft-address for each voter, this node included). A restarted node
ignores --bootstrap and resumes from --data-dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runCoordinator(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	o.nats.register(fl, "nats", "NATS URL(s), comma separated")
	fl.StringVar(&o.id, "id", "", "node id (Raft server id), a subject token (required)")
	fl.StringVar(&o.dataDir, "data-dir", "", "directory for the Raft log, snapshots and the eval store (required)")
	fl.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:7100", "Raft TCP bind address")
	fl.BoolVar(&o.bootstrap, "bootstrap", false, "bootstrap a new cluster (with --peers: all voters)")
	fl.StringSliceVar(&o.peers, "peers", nil, "voters of a new cluster, id=raft-address (with --bootstrap)")
	fl.StringSliceVar(&o.workers, "workers", nil, "allowlisted worker ids (required)")
	fl.IntVar(&o.replicas, "replicas", 1, "replicas of the ADK_TASKS and ADK_RESULTS streams (1 or 3)")
	fl.StringVar(&o.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	return cmd
}

func (o *coordinatorOptions) config() (coordinator.Config, error) {
	var missing []string
	for _, m := range []struct{ name, v string }{{"id", o.id}, {"data_dir", o.dataDir}} {
		if m.v == "" {
			missing = append(missing, m.name)
		}
	}
	if len(o.workers) == 0 {
		missing = append(missing, "workers")
	}
	if len(missing) > 0 {
		return coordinator.Config{}, &cliError{Code: codeMissingRequired, Reason: strings.Join(missing, ",")}
	}
	if len(o.peers) > 0 && !o.bootstrap {
		return coordinator.Config{}, usageError{errors.New("--peers needs --bootstrap")}
	}
	if o.replicas != 1 && o.replicas != 3 {
		return coordinator.Config{}, usageError{errors.New("--replicas must be 1 or 3")}
	}
	cfg := coordinator.Config{ID: o.id, DataDir: o.dataDir, RaftAddr: o.raftAddr, Bootstrap: o.bootstrap,
		Workers: o.workers, Streams: bus.TaskStreamConfig{Replicas: o.replicas}}
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

// runCoordinator runs until ctx ends, then stops the node (service, leader
// loop, Raft, stores) and closes its connection.
func runCoordinator(ctx context.Context, o coordinatorOptions, stdout, stderr io.Writer) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	if cfg.Logger, err = newLogger(stderr, o.logLevel); err != nil {
		return err
	}
	nc, err := o.nats.connect("nats", "adk-coordinator-"+o.id)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg.NATS = nc
	n, err := coordinator.Start(cfg)
	if err != nil {
		return fmt.Errorf("start coordinator: %w", err)
	}
	defer n.Stop()
	fmt.Fprintf(stdout, "adk coordinator %s: raft %s, data %s, workers %s\n", o.id, n.RaftAddr(), o.dataDir, strings.Join(o.workers, ","))
	<-ctx.Done()
	return nil
}
