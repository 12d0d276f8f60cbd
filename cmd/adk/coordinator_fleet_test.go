package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/internal/loopback"
	"github.com/fadcedab/adk/internal/testutil"
)

// adkProc is one running `adk` process of the built binary.
type adkProc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr testutil.Buffer
	done           chan struct{}
	err            error // Wait's answer, once done is closed
}

// fleet owns the processes of one test and stops them all at once.
type fleet struct {
	t     *testing.T
	procs []*adkProc
}

func newFleet(t *testing.T) *fleet {
	f := &fleet{t: t}
	t.Cleanup(f.stopAll)
	return f
}

// start runs the binary with args in the repository root.
func (f *fleet) start(name string, args ...string) *adkProc {
	f.t.Helper()
	p := &adkProc{name: name, cmd: exec.Command(adkBinary(f.t), args...), done: make(chan struct{})}
	p.cmd.Dir = repoRoot(f.t)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		f.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	f.procs = append(f.procs, p)
	return p
}

// stopAll sends SIGTERM to every running process, then waits for each: a
// SIGTERM must end it cleanly (exit 0) within 20 s.
func (f *fleet) stopAll() {
	var running []*adkProc
	for _, p := range f.procs {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			running = append(running, p)
		}
	}
	for _, p := range running {
		p.wait(f.t, syscall.SIGTERM)
	}
	if f.t.Failed() {
		for _, p := range f.procs {
			f.t.Logf("%s's stderr (the last %d bytes):\n%s", p.name, fleetLogTail, lastBytes(p.stderr.String(), fleetLogTail))
		}
	}
}

// fleetLogTail bounds each process's log a failed test prints.
const fleetLogTail = 16 << 10

// lastBytes is the last n bytes of s.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// kill ends the process with SIGKILL and waits for it.
func (p *adkProc) kill(t *testing.T) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t, syscall.SIGKILL)
}

func (p *adkProc) wait(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop on %v; stderr:\n%s", p.name, sig, p.stderr.String())
		return
	}
	if sig == syscall.SIGTERM && p.err != nil {
		t.Errorf("%s after SIGTERM: %v; stderr:\n%s", p.name, p.err, p.stderr.String())
	}
}

// exited reports whether the process has ended.
func (p *adkProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startTestNATS runs a JetStream NATS server on a free loopback port.
func startTestNATS(t *testing.T) string {
	t.Helper()
	return bustest.Start(t, bus.ServerConfig{Port: -1}).ClientURL()
}

// freeAddrs returns n distinct loopback addresses that were free a moment
// ago (--peers needs the Raft addresses before the processes start).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := loopback.FreeAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// fleetState is what the cluster reports: the leader and the voters.
func fleetState(cl *client.Client) (leader string, voters int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	caps, err := cl.Capabilities(ctx)
	if err != nil {
		return "", 0
	}
	for _, m := range caps.Members {
		if m.Voter {
			voters++
		}
	}
	return caps.Leader, voters
}

// TestClusterCoordinatorProcesses runs a fleet from the built binary: a
// NATS server, three `adk coordinator` processes and two `adk worker`
// processes. The cluster forms either with --bootstrap --peers on every
// node or with one --bootstrap node that two --join nodes join; `adk eval
// run --cluster` then gives the local run's report and exit code, and
// again after the leader process is killed. A further coordinator opening
// a live node's data dir fails with eval_store_already_owned.
func TestClusterCoordinatorProcesses(t *testing.T) {
	root := repoRoot(t)
	set := filepath.Join(root, "examples", "travel", "evalset.json")
	criteria := filepath.Join(root, "examples", "travel", "criteria.json")
	agent := filepath.Join(root, "examples", "travel", "AGENT.json")
	local := runCLI(t, exitOK, "eval", "run", "--config", travelAgent, "--eval-set", travelSet, "--criteria", travelCriteria, "--format", "markdown")

	for _, mode := range []string{"peers", "join"} {
		t.Run(mode, func(t *testing.T) {
			began := time.Now()
			url := startTestNATS(t)
			procs := newFleet(t)
			ids := []string{"c1", "c2", "c3"}
			addrs := freeAddrs(t, 3)
			dirs := map[string]string{}
			coords := map[string]*adkProc{}
			for i, id := range ids {
				dirs[id] = filepath.Join(t.TempDir(), id)
				args := []string{"coordinator", "--id", id, "--data-dir", dirs[id], "--nats", url, "--workers", "w1,w2", "--log-level", "error"}
				switch {
				case mode == "peers":
					var peers []string
					for j, p := range ids {
						peers = append(peers, p+"="+addrs[j])
					}
					args = append(args, "--raft-addr", addrs[i], "--bootstrap", "--peers", strings.Join(peers, ","))
				case i == 0:
					args = append(args, "--raft-addr", "127.0.0.1:0", "--bootstrap", "--coordinators", "c1,c2,c3")
				default:
					// The config file sets what the flags do not; --id
					// overrides the file's.
					cfg := writeFile(t, t.TempDir(), "coordinator.json",
						`{"coordinator": {"id": "wrong", "nats": "`+url+`", "data_dir": "`+dirs[id]+`", "raft_addr": "127.0.0.1:0", "join": true,
						  "workers": ["w1", "w2"], "coordinators": ["c1", "c2", "c3"]}, "log": {"level": "error"}}`)
					args = []string{"coordinator", "--config", cfg, "--id", id}
				}
				coords[id] = procs.start(id, args...)
			}
			for _, w := range []string{"w1", "w2"} {
				procs.start(w, "worker", "--id", w, "--nats", url, "--capacity", "2", "--agent", "travel="+agent, "--log-level", "error")
			}

			nc, err := bus.Connect(url)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			cl := client.New(nc, 5*time.Second)
			var leader string
			testutil.WaitFor(t, 30*time.Second, "three voters and a leader", func() bool {
				for id, p := range coords {
					if p.exited() {
						t.Fatalf("%s exited: %v\n%s", id, p.err, p.stderr.String())
					}
				}
				var voters int
				leader, voters = fleetState(cl)
				return leader != "" && voters == 3
			})

			t.Logf("formed: %s", time.Since(began))
			evalArgs := []string{"eval", "run", "--cluster", url, "--agent", "travel", "--eval-set", set, "--criteria", criteria, "--format", "markdown"}
			if r := runADK(t, root, nil, evalArgs...); r.code != exitOK || r.stdout != local {
				t.Fatalf("first job: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
			}

			t.Logf("first job: %s", time.Since(began))
			// Nothing but the leader creates ADK_SIGNALS on an external
			// server: the workers traced the job into it.
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, 10*time.Second, "the job's traces in "+bus.SignalStreamName, func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				st, err := js.Stream(ctx, bus.SignalStreamName)
				if err != nil {
					return false
				}
				info, err := st.Info(ctx)
				return err == nil && info.State.Msgs > 0
			})
			coords[leader].kill(t)
			testutil.WaitFor(t, 30*time.Second, "a new leader", func() bool {
				l, _ := fleetState(cl)
				return l != "" && l != leader
			})
			t.Logf("new leader: %s", time.Since(began))
			if r := runADK(t, root, nil, evalArgs...); r.code != exitOK || r.stdout != local {
				t.Fatalf("job after killing leader %s: exit %d, stderr %q\n%s", leader, r.code, r.stderr, r.stdout)
			}

			t.Logf("second job: %s", time.Since(began))
			var live string
			for _, id := range ids {
				if id != leader {
					live = id
					break
				}
			}
			r := runADK(t, root, nil, "coordinator", "--id", "c9", "--data-dir", dirs[live], "--raft-addr", "127.0.0.1:0", "--nats", url, "--workers", "w1")
			oneErrorLine(t, r, evalstoreAlreadyOwned)
			t.Logf("owner check: %s", time.Since(began))
			if !strings.Contains(r.stderr, filepath.Join(dirs[live], "evalstore")) {
				t.Errorf("the owned-store error does not name the directory: %q", r.stderr)
			}
		})
	}
}

const evalstoreAlreadyOwned = "eval_store_already_owned"

// TestClusterCoordinatorJoinRefusals: a join naming an id off the leader's
// allowlist, or a member's id at another address, or a malformed address,
// gets a typed answer and changes nothing.
func TestClusterCoordinatorJoinRefusals(t *testing.T) {
	url := startTestNATS(t)
	c1 := newFleet(t).start("c1", "coordinator", "--id", "c1", "--data-dir", filepath.Join(t.TempDir(), "c1"), "--raft-addr", "127.0.0.1:0",
		"--nats", url, "--bootstrap", "--workers", "w1", "--coordinators", "c2", "--log-level", "error")
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := client.New(nc, 5*time.Second)
	var members []api.Member
	testutil.WaitFor(t, 30*time.Second, "c1 leads", func() bool {
		if c1.exited() {
			t.Fatalf("c1 exited: %v\n%s", c1.err, c1.stderr.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		caps, err := cl.Capabilities(ctx)
		if err == nil {
			members = caps.Members
		}
		return err == nil && caps.Leader == "c1"
	})
	if len(members) != 1 {
		t.Fatalf("members %+v", members)
	}
	join := func(id, addr string) *api.Error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := cl.Call(ctx, api.OpJoin, &api.Request{Scope: "_", Join: &api.JoinRequest{ID: id, RaftAddr: addr}})
		return api.AsError(err)
	}
	for _, tc := range []struct {
		id, addr, code string
	}{
		{"c7", "127.0.0.1:7777", api.CodeJoinNotAllowed},
		{"c1", "127.0.0.1:7777", api.CodeMemberConflict},
		{"c2", members[0].Addr, api.CodeMemberConflict},
		{"c2", "0.0.0.0:7777", api.CodeInvalidRequest},
		{"c2", "no-port", api.CodeInvalidRequest},
		{"c2", "127.0.0.1:99999", api.CodeInvalidRequest},
		{"c2", "h:1" + strings.Repeat("1", api.MaxRaftAddrLen), api.CodeInvalidRequest},
		{"bad id", "127.0.0.1:7777", api.CodeInvalidRequest},
	} {
		if e := join(tc.id, tc.addr); e == nil || e.Code != tc.code {
			t.Errorf("join %s at %.40s: %v, want %s", tc.id, tc.addr, e, tc.code)
		}
	}
	// The same id and address as a member is an idempotent success.
	if e := join("c1", members[0].Addr); e != nil {
		t.Errorf("join of an existing member at its address: %v", e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	caps, err := cl.Capabilities(ctx)
	if err != nil || len(caps.Members) != 1 || caps.Members[0] != members[0] {
		t.Fatalf("membership changed: %+v %v", caps, err)
	}
	// A --join node that is not allowlisted stops with the typed error.
	r := runADK(t, repoRoot(t), nil, "coordinator", "--id", "c8", "--data-dir", filepath.Join(t.TempDir(), "c8"), "--raft-addr", "127.0.0.1:0",
		"--nats", url, "--join", "--workers", "w1")
	oneErrorLine(t, r, api.CodeJoinNotAllowed)
}
