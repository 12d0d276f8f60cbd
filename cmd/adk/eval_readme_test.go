package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReadme_EvaluatingInCI runs every command of the README's
// "Evaluating in CI" section, in order, so the README stays true: each
// ```sh line starting with ./bin/adk runs through the built binary in a
// scratch directory that links the repository's examples/, and must exit
// 0 (or the code its "# exits N" comment names). The section's two
// ```json blocks become judge-criteria.json and judge.json, the latter
// pointed at a fake Gemini server on 127.0.0.1.
// The README's example HTTP agent: the command that starts it and the URL
// the commands after it use.
const (
	httpAgentCommand = "go run ./examples/http-agent "
	readmeAgentURL   = "http://127.0.0.1:8089/"
)

// adkLine matches a README command of the built binary, after any
// VAR=value words.
var adkLine = regexp.MustCompile(`^([A-Z_]+=\S*\s+)*\./bin/adk `)

func TestReadme_EvaluatingInCI(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "\n## Evaluating in CI\n")
	if start < 0 {
		t.Fatal(`README has no "## Evaluating in CI" section`)
	}
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	blocks := regexp.MustCompile("(?s)```(sh|json)\n(.*?)```").FindAllStringSubmatch(section, -1)

	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	const key = "AIza-readme-Kq3Vt8Wm1Zr6"
	var sawKey atomic.Value
	var viaTransport, viaLean atomic.Int32
	srv := fakeGeminiPaths(t, &sawKey, &viaTransport, &viaLean)
	var jsonBlocks []string
	var commands []string
	for _, b := range blocks {
		if b[1] == "json" {
			jsonBlocks = append(jsonBlocks, b[2])
			continue
		}
		for _, line := range strings.Split(b[2], "\n") {
			if adkLine.MatchString(line) || strings.HasPrefix(line, httpAgentCommand) {
				commands = append(commands, line)
			}
		}
	}
	if len(jsonBlocks) != 2 || len(commands) < 8 {
		t.Fatalf("found %d json blocks and %d commands; the test expects the judge's two json blocks and the section's commands", len(jsonBlocks), len(commands))
	}
	writeFile(t, dir, "judge-criteria.json", jsonBlocks[0])
	var judge map[string]any
	if err := json.Unmarshal([]byte(jsonBlocks[1]), &judge); err != nil {
		t.Fatalf("the judge config block: %v", err)
	}
	judge["base_url"] = srv.URL
	data, _ := json.Marshal(judge)
	writeFile(t, dir, "judge.json", string(data))
	env := []string{"GEMINI_API_KEY=" + key}

	exits := regexp.MustCompile(`#\s*exits (\d)`)
	agentURL := ""
	for _, line := range commands {
		if strings.HasPrefix(line, httpAgentCommand) {
			// The README starts the example HTTP agent on its documented
			// port; the test starts it on a free one and points the
			// following commands at it.
			agentURL = startHTTPAgent(t)
			continue
		}
		if agentURL != "" {
			line = strings.ReplaceAll(line, readmeAgentURL, agentURL)
		}
		want := exitOK
		cmdline := line
		if i := strings.Index(line, "#"); i >= 0 {
			cmdline = line[:i]
			if m := exits.FindStringSubmatch(line[i:]); m != nil {
				want, _ = strconv.Atoi(m[1])
			}
		}
		lineEnv, args := splitReadmeLine(cmdline)
		transportBefore, leanBefore := viaTransport.Load(), viaLean.Load()
		r := runADK(t, dir, append(lineEnv, env...), args...)
		if r.code != want {
			t.Errorf("README command %q: exit %d, want %d (stderr %q)", line, r.code, want, r.stderr)
		}
		// The judge's calls to the fake (http://127.0.0.1) take httpx's
		// lean path unless the line switches it off.
		transport, lean := viaTransport.Load()-transportBefore, viaLean.Load()-leanBefore
		if off := slices.Contains(lineEnv, "ADK_LEAN_HTTP=off"); off && (lean > 0 || transport == 0) || !off && transport > 0 {
			t.Errorf("README command %q: %d judge calls through net/http, %d through the lean path", line, transport, lean)
		}
		if strings.Contains(r.stdout, key) || strings.Contains(r.stderr, key) {
			t.Errorf("README command %q printed the API key", line)
		}
	}
	if k, _ := sawKey.Load().(string); k != key {
		t.Errorf("the judge command never reached the fake Gemini server with the key")
	}
}
