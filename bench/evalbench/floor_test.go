//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestFloorClient_CallsTheFakeOncePerSample runs each floor client with an
// openai row's arguments against the real fake: one call per sample over
// at most one connection per slot, and every answer in its output.
func TestFloorClient_CallsTheFakeOncePerSample(t *testing.T) {
	fake := testutil.Binary(t, "../openaifake")
	for _, client := range floorClients {
		t.Run(client, func(t *testing.T) {
			// fasthttp's idle-connection cleaner outlives the client by
			// up to its MaxIdleConnDuration: wait for it.
			defer func(before goleak.Option) {
				testutil.WaitFor(t, 10*time.Second, "the floor client's goroutines to end", func() bool {
					return goleak.Find(append(testutil.LeakOptions(), before)...) == nil
				})
			}(goleak.IgnoreCurrent())
			addr, _, stop := startFake(fake, time.Millisecond)
			defer stop()
			dir := t.TempDir()
			config, set := filepath.Join(dir, "openai.json"), filepath.Join(dir, "set.json")
			if err := os.WriteFile(config, []byte(openAIAgent(addr)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(set, evalSet(5, "hello", "ok", false), 0o644); err != nil {
				t.Fatal(err)
			}
			const samples, conc = 8, 4
			var out bytes.Buffer
			args := []string{"eval", "run", "--config", config, "--eval-set", set, "--samples", strconv.Itoa(samples),
				"--concurrency", strconv.Itoa(conc), "--timeout", "600000", "--format", "json"}
			if err := floorClient(client, args, &out); err != nil {
				t.Fatal(err)
			}
			var answers []struct {
				Choices []struct {
					Message struct{ Content string }
				}
			}
			if err := json.Unmarshal(out.Bytes(), &answers); err != nil {
				t.Fatalf("output: %v", err)
			}
			if len(answers) != 5*samples {
				t.Errorf("%d answers, want %d", len(answers), 5*samples)
			}
			for i, a := range answers {
				if len(a.Choices) != 1 || a.Choices[0].Message.Content == "" {
					t.Fatalf("answer %d: %+v, want the fake's completion", i, a)
				}
			}
			resp, err := http.Get("http://" + addr + "/stats")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var st struct{ Served, Conns int }
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			// The stats request itself is one more connection.
			if st.Served != 5*samples || st.Conns > conc+1 {
				t.Errorf("the fake served %d calls over %d connections, want %d over at most %d", st.Served, st.Conns, 5*samples, conc+1)
			}
		})
	}
}

// TestFloorClient_RefusesAnUnknownClient names the clients it knows.
func TestFloorClient_RefusesAnUnknownClient(t *testing.T) {
	dir := t.TempDir()
	config, set := filepath.Join(dir, "openai.json"), filepath.Join(dir, "set.json")
	if err := os.WriteFile(config, []byte(openAIAgent("127.0.0.1:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(set, evalSet(1, "hello", "ok", false), 0o644); err != nil {
		t.Fatal(err)
	}
	err := floorClient("curl", []string{"--config", config, "--eval-set", set, "--samples", "1", "--concurrency", "2"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `"curl"`) || !strings.Contains(err.Error(), floorFastHTTP) {
		t.Fatalf("err %v, want one naming the client and the known ones", err)
	}
}

// TestFloorClient_RefusesMissingFlags names the flag it could not read.
func TestFloorClient_RefusesMissingFlags(t *testing.T) {
	dir := t.TempDir()
	config, set := filepath.Join(dir, "openai.json"), filepath.Join(dir, "set.json")
	if err := os.WriteFile(config, []byte(openAIAgent("127.0.0.1:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(set, evalSet(1, "hello", "ok", false), 0o644); err != nil {
		t.Fatal(err)
	}
	err := floorClient(floorNetHTTP, []string{"--config", config, "--eval-set", set, "--concurrency", "2"}, &bytes.Buffer{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("--samples")) {
		t.Fatalf("err %v, want one naming --samples", err)
	}
}
