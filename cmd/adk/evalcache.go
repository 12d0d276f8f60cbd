package main

import (
	"errors"
	"os"
	"strings"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/evalengine/respcache"
)

// The response cache of `adk eval run` (issue 16; evalengine/respcache).
// Decisions where the issue is silent:
//
//   - --cache DIR (or ADK_CACHE_DIR) turns it on in readwrite mode;
//     --cache-mode picks read, write, readwrite or off. --cache-mode
//     without a directory is missing_required_options (cache).
//   - It caches the model calls of an AGENT.json agent. An --agent-url
//     agent has no model calls adk sees: --cache with --agent-url is
//     conflicting_options; ADK_CACHE_DIR is then ignored.
//   - The counts go into the result's metadata (response_cache: mode,
//     hits, misses, writes) and the Markdown report. A resumed run counts
//     its own calls only.
//   - A directory Badger cannot open is response_cache_unavailable
//     before anything runs; a damaged entry is a miss.

const envCacheDir = "ADK_CACHE_DIR"

// openEvalCache opens the run's response cache, or returns nil.
func openEvalCache(flagDir, mode, agentURL string) (*respcache.Cache, error) {
	dir := flagDir
	if dir == "" {
		dir = os.Getenv(envCacheDir)
	}
	if mode != "" {
		if err := respcache.CheckMode(mode); err != nil {
			return nil, &cliError{Code: respcache.CodeInvalidMode, Reason: "cache_mode", Detail: "valid: " + strings.Join(respcache.Modes(), ", ")}
		}
	}
	if mode == "" {
		mode = respcache.ModeReadWrite
		if dir == "" {
			mode = respcache.ModeOff
		}
	}
	if mode == respcache.ModeOff {
		return nil, nil
	}
	if agentURL != "" {
		if flagDir != "" {
			return nil, &cliError{Code: codeConflictingOptions, Reason: "cache,agent_url", Detail: "the cache holds model calls of an AGENT.json agent"}
		}
		return nil, nil
	}
	if dir == "" {
		return nil, &cliError{Code: codeMissingRequired, Reason: "cache", Detail: "--cache-mode needs --cache DIR or " + envCacheDir}
	}
	c, err := respcache.Open(respcache.Config{Dir: dir, Mode: mode})
	if err != nil {
		var ce *respcache.Error
		if errors.As(err, &ce) {
			return nil, &cliError{Code: ce.Code, Detail: ce.Detail, Err: err}
		}
		return nil, &cliError{Code: respcache.CodeCacheUnavailable, Err: err}
	}
	return c, nil
}

// wrapModel is the agent adapter's hook into the cache.
func cacheWrap(c *respcache.Cache) func(model.Provider, string, evalengine.SampleInfo) model.Provider {
	if c == nil {
		return nil
	}
	return func(p model.Provider, name string, info evalengine.SampleInfo) model.Provider {
		return c.Wrap(p, name, info.SampleIndex)
	}
}

// recordCacheStats puts the cache's counts into the result's metadata.
func recordCacheStats(r *evalengine.Result, c *respcache.Cache) {
	if c == nil || r == nil {
		return
	}
	s := c.Stats()
	meta := make(map[string]any, len(r.Metadata)+1)
	for k, v := range r.Metadata {
		meta[k] = v
	}
	meta[evalengine.MetadataResponseCache] = map[string]any{"mode": c.Mode(), "hits": s.Hits, "misses": s.Misses, "writes": s.Writes}
	r.Metadata = meta
}
