package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/settings"
	"github.com/fadcedab/adk/worker"
)

// serveWorkerID is the id of `adk serve`'s embedded worker (and of its
// coordinator node).
const serveWorkerID = "local"

// defaultServeCapacity is the embedded worker's default --capacity.
const defaultServeCapacity = 8

// serveEvalOptions are `adk serve`'s eval flags.
type serveEvalOptions struct {
	agents   []string
	raftAddr string
	capacity int
	drain    time.Duration
	// warnEvery is the settings file's log.signal_warn_interval (runServe
	// sets it from the resolved file).
	warnEvery time.Duration
	// agentFiles are the settings file's worker.agents, used when no
	// --agent is given.
	agentFiles map[string]string
}

func (o *serveEvalOptions) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&o.agents, "agent", nil, "trusted agent NAME=AGENT.json of the embedded worker (repeatable; none: no worker)")
	fl.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:0", "Raft address of the embedded one-node coordinator")
	fl.DurationVar(&o.drain, "trace-drain", defaultTraceDrain, "at exit, wait at most this long for the worker's traces to be published (1ms..5m)")
}

// serveEval is the eval half of `adk serve`: a one-node Raft coordinator
// and, with --agent, one worker, both on in-process connections.
type serveEval struct {
	coord   *coordinator.Node
	worker  *worker.Worker
	tracing *fleetTracing
	conns   []*nats.Conn
	// apiConn is the developer API's connection to the coordinator
	// service.
	apiConn *nats.Conn
	// agents are the worker's agent names, sorted.
	agents []string
}

// startServeEval starts the coordinator (bootstrapping a one-voter
// cluster in dataDir/coordinator the first time) and the worker.
func startServeEval(srv *bus.Server, dataDir string, o serveEvalOptions, c settings.Coordinator, stdout io.Writer, log *slog.Logger) (_ *serveEval, err error) {
	agents := map[string]string{}
	if err := parseAgentFlags(o.agents, agents); err != nil {
		return nil, err
	}
	if len(o.agents) == 0 {
		maps.Copy(agents, o.agentFiles)
	}
	if o.capacity == 0 {
		o.capacity = defaultServeCapacity
	}
	if o.capacity < 1 || o.capacity > maxWorkerCapacity {
		return nil, &cliError{Code: codeInvalidPositiveInt, Reason: "capacity"}
	}
	s := &serveEval{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	nc, err := srv.Connect()
	if err != nil {
		return nil, err
	}
	s.conns = append(s.conns, nc)
	s.coord, err = coordinator.Start(coordinator.Config{ID: serveWorkerID, DataDir: filepath.Join(dataDir, "coordinator"),
		RaftAddr: o.raftAddr, Bootstrap: true, NATS: nc, Workers: []string{serveWorkerID},
		Streams: bus.TaskStreamConfig{Replicas: 1}, Logger: log, Limits: c.Limits(), StoreLimits: c.StoreLimits(), ResultTails: c.Tails()})
	if err != nil {
		return nil, coordinatorStartError(err)
	}
	if s.apiConn, err = srv.Connect(); err != nil {
		return nil, err
	}
	s.conns = append(s.conns, s.apiConn)
	if len(agents) > 0 {
		wnc, err := srv.Connect(nats.CustomInboxPrefix(bus.WorkerInboxPrefix(serveWorkerID)))
		if err != nil {
			return nil, err
		}
		s.conns = append(s.conns, wnc)
		if o.drain == 0 {
			o.drain = defaultTraceDrain
		}
		if s.tracing, err = startFleetTracing(wnc, os.Getenv, "adk-serve", o.drain, log, o.warnEvery, "adk serve worker"); err != nil {
			return nil, err
		}
		wc := worker.Config{ID: serveWorkerID, NATS: wnc, Capacity: o.capacity, AgentFiles: agents, Logger: log}
		s.tracing.workerConfig(&wc)
		s.worker, err = worker.Start(wc)
		if err != nil {
			return nil, &cliError{Code: codeInvalidAgentConfig, Detail: err.Error(), Err: err}
		}
	}
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	sort.Strings(names)
	s.agents = names
	fmt.Fprintf(stdout, "adk serve: eval coordinator (raft %s), worker agents [%s]\n", s.coord.RaftAddr(), strings.Join(names, ","))
	return s, nil
}

// stop stops the worker (killing its tasks), then the coordinator, then
// closes the connections. Safe on a partly started serveEval.
func (s *serveEval) stop() {
	if s.worker != nil {
		s.worker.Stop()
	}
	if s.tracing != nil {
		s.tracing.finish(os.Stderr)
	}
	if s.coord != nil {
		s.coord.Stop()
	}
	for _, nc := range s.conns {
		nc.Close()
	}
}
