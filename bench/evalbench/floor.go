package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
)

// floorEnv switches evalbench, re-executed as a row's client, into the
// floor client.
const floorEnv = "EVALBENCH_FLOOR"

// The floor client is the least a client of the fake can do for an openai
// row: the row's cases × samples POSTs at its concurrency through one
// net/http Transport (at most a connection per slot, kept across waves), each
// answer read and JSON-decoded, and every answer written to stdout at the
// end. It runs as its own process in the same rounds as adk, so its row
// shows what this machine allows a row (process start, 256 dials on 2
// cores shared with the fake, the waves, the exit): the share of the
// Little's-law bound adk can be held to here, and how much of adk's
// distance to the bound is its own.
//
// It takes adk's arguments (--config, --eval-set, --samples,
// --concurrency) and reads the fake's base_url from the agent config and
// the number of cases from the set.
func floorClient(args []string, out io.Writer) error {
	flagOf := func(name string) string {
		for i := 0; i+1 < len(args); i++ {
			if args[i] == name {
				return args[i+1]
			}
		}
		return ""
	}
	var cfg struct {
		Model struct {
			Model   string `json:"model"`
			BaseURL string `json:"base_url"`
		} `json:"model"`
		Instruction string `json:"instruction"`
	}
	var set struct {
		Cases []struct {
			Input string `json:"input"`
		} `json:"cases"`
	}
	for _, f := range []struct {
		path string
		v    any
	}{{flagOf("--config"), &cfg}, {flagOf("--eval-set"), &set}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, f.v); err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
	}
	samples, err := strconv.Atoi(flagOf("--samples"))
	if err != nil {
		return fmt.Errorf("--samples: %w", err)
	}
	conc, err := strconv.Atoi(flagOf("--concurrency"))
	if err != nil {
		return fmt.Errorf("--concurrency: %w", err)
	}
	n := len(set.Cases) * samples
	bodies := make([][]byte, len(set.Cases))
	for i, c := range set.Cases {
		bodies[i], _ = json.Marshal(map[string]any{"model": cfg.Model.Model, "messages": []map[string]string{
			{"role": "system", "content": cfg.Instruction}, {"role": "user", "content": c.Input}}})
	}
	// At most one connection per slot: a call that finds none idle waits
	// for one instead of dialing a spare (which a fast client would do
	// while the last answer's connection is on its way back to the pool).
	transport := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	url := cfg.Model.BaseURL + "/chat/completions"
	answers := make([]json.RawMessage, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := floorCall(client, url, bodies[i%len(bodies)], &answers[i]); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	doc, err := json.Marshal(answers)
	if err != nil {
		return err
	}
	_, err = out.Write(doc)
	return err
}

func floorCall(client *http.Client, url string, body []byte, answer *json.RawMessage) error {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	var v struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*answer = b
	return nil
}
