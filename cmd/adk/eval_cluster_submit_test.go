package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
)

// TestClusterEval_SubmitTakenByADyingLeaderThroughBinaries: `adk eval run
// --cluster` whose submit is taken by a coordinator that applies it and
// dies before answering, with the leader process killed -9 at that
// moment, still runs the job it submitted, once, and ends long before its
// 30 s call timeout (before, it ended there with "adk: timeout"). Three
// `adk coordinator` processes and an `adk worker`; the dying coordinator
// is a member of their queue group that the test holds (with eight
// subscriptions of the group to the three coordinators' one each, so
// NATS's random pick gives it most submits): the runs repeat, each in its
// own scope, until one reaches it.
func TestClusterEval_SubmitTakenByADyingLeaderThroughBinaries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	adkBinary(t)
	dir := t.TempDir()
	agent := writeFile(t, dir, "agent.json", `{"schema_version":1,"name":"ok","model":{"provider":"openai","model":"fake","base_url":"`+srv.URL+
		`/v1","max_attempts":1,"timeout_ms":30000}}`)
	writeFile(t, dir, "set.json", `{"schema_version":2,"id":"dying","version":"1","cases":[{"id":"c0","turns":[{"id":"t","input":"hi","expected_response":"ok"}]}]}`)

	url := startTestNATS(t)
	procs := newFleet(t)
	ids := []string{"c1", "c2", "c3"}
	addrs := freeAddrs(t, 3)
	var peers []string
	for i, id := range ids {
		peers = append(peers, id+"="+addrs[i])
	}
	coords := map[string]*adkProc{}
	for i, id := range ids {
		coords[id] = procs.start(id, "coordinator", "--id", id, "--data-dir", filepath.Join(dir, id), "--raft-addr", addrs[i],
			"--bootstrap", "--peers", strings.Join(peers, ","), "--nats", url, "--workers", "w1", "--log-level", "error")
	}
	procs.start("w1", "worker", "--id", "w1", "--nats", url, "--capacity", "4", "--agent", "ok="+agent, "--log-level", "error")
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := client.New(nc, 2*time.Second)
	testutil.WaitFor(t, 60*time.Second, "three voters, a leader and the worker's agent", func() bool {
		for id, p := range coords {
			if p.exited() {
				t.Fatalf("%s exited: %v\n%s", id, p.err, p.stderr.String())
			}
		}
		leader, voters := fleetState(cl)
		caps, err := cl.Capabilities(context.Background())
		return leader != "" && voters == 3 && err == nil && len(caps.Agents) == 1
	})

	dead, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	subj, _ := bus.CoordSubject(api.OpSubmit)
	taken := make(chan *nats.Msg, 16)
	var subs []*nats.Subscription
	for range 8 {
		sub, err := dead.ChanQueueSubscribe(subj, coordinator.ServiceName, taken)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	if err := dead.Flush(); err != nil {
		t.Fatal(err)
	}
	for run := 0; ; run++ {
		if run == 24 {
			t.Fatal("the dying coordinator took no submit in 24 runs")
		}
		scope := fmt.Sprintf("run-%d", run)
		// The leader, looked up before the run so that it is killed at
		// once after the take, before the CLI's own resend (2 s) can
		// reach it.
		leader, _ := fleetState(cl)
		done := make(chan execResult, 1)
		go func() {
			done <- runADK(t, dir, nil, "eval", "run", "--cluster", url, "--scope", scope, "--agent", "ok", "--eval-set", "set.json")
		}()
		var msg *nats.Msg
		select {
		case r := <-done: // a live coordinator took it
			if r.code != exitOK {
				t.Fatalf("run %d: exit %d stderr %q", run, r.code, r.stderr)
			}
			continue
		case msg = <-taken:
		}
		took := time.Now()
		for _, sub := range subs {
			if err := sub.Unsubscribe(); err != nil {
				t.Fatal(err)
			}
		}
		// The leader is killed, and the dying coordinator has the submit
		// applied (a live one does it for it, through the new leader; the
		// answer goes nowhere) and dies. (Killed after the apply, the
		// leader may have dispatched the job's task and not published it:
		// the task then fails worker_lost, by design; the testcluster
		// test covers that order. It can still happen here when the
		// CLI's resend reached the leader first on a slow machine.)
		if p := coords[leader]; p != nil {
			p.kill(t)
		}
		if _, err := nc.Request(subj, msg.Data, 20*time.Second); err != nil {
			t.Fatalf("apply the taken submit: %v", err)
		}
		dead.Close()
		var r execResult
		select {
		case r = <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the run did not end")
		}
		t.Logf("run %d: the submit taken, leader %s killed; the run ended %v later", run, leader, time.Since(took))
		if r.code != exitOK && (r.code != exitFailed || !onlyWorkerLost(t, r.stdout)) {
			t.Fatalf("exit %d stderr %q\n%.2000s", r.code, r.stderr, r.stdout)
		}
		jobs, err := client.New(nc, 10*time.Second).ListJobs(context.Background(), scope, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 1 {
			t.Fatalf("%d jobs in %s, want the one submitted", len(jobs.Items), scope)
		}
		return
	}
}

// onlyWorkerLost reports whether a result document's failed samples all
// failed worker_lost (a task the killed leader dispatched and never
// published: at most once, by design).
func onlyWorkerLost(t *testing.T, doc string) bool {
	t.Helper()
	var res struct {
		Cases []struct {
			Samples []struct {
				Error string `json:"error"`
			} `json:"samples"`
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(doc), &res); err != nil {
		return false
	}
	lost := 0
	for _, c := range res.Cases {
		for _, s := range c.Samples {
			switch s.Error {
			case "":
			case evalengine.TagWorkerLost:
				lost++
			default:
				return false
			}
		}
	}
	return lost > 0
}
