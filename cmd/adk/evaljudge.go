package main

import (
	"encoding/json"
	"errors"
	"os"

	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/jsonlimit"
)

// codeInvalidJudgeConfig is a bad --judge-config file.
const codeInvalidJudgeConfig = "invalid_judge_config"

// maxJudgeHTTPTimeoutMS bounds judge-config timeout_ms (the engine's
// ceiling for one judge call).
const maxJudgeHTTPTimeoutMS = evalengine.MaxJudgeTimeoutMS

// judgeConfigFile is the machine's judge configuration (--judge-config):
// which provider and model score llm_judge criteria, and where the key
// comes from. The criteria file holds only the rubric and bounds; it can
// never name a provider, a model or a credential.
type judgeConfigFile struct {
	Provider  string `json:"provider"`    // "gemini" | "openai"
	Model     string `json:"model"`       // default gemini-3.1-flash-lite for gemini
	BaseURL   string `json:"base_url"`    // default the provider's public endpoint
	APIKeyEnv string `json:"api_key_env"` // default GEMINI_API_KEY or OPENAI_API_KEY
	TimeoutMS int    `json:"timeout_ms"`  // per HTTP attempt; 0 = the criterion's request_timeout_ms
	// RateLimit is the endpoint's limits, as in an AGENT.json model block;
	// one limiter per endpoint is shared by every judge and simulator call
	// of the run.
	RateLimit json.RawMessage `json:"rate_limit"`
}

// loadJudgeConfig reads --judge-config into the engine's ModelEnv. The
// file is bounded (1 MiB, internal/jsonlimit) and closed (unknown keys are
// refused). Errors name keys and variables, never values.
func loadJudgeConfig(path string) (*evalengine.ModelEnv, error) {
	return loadModelConfig(path, "judge_config", codeInvalidJudgeConfig)
}

// codeInvalidUserSimulatorConfig is a bad --user-simulator-config.
const codeInvalidUserSimulatorConfig = "invalid_user_simulator_config"

// loadModelConfig reads a machine's model configuration: the judge's
// (--judge-config) or the LLM user simulator's (--user-simulator-config),
// which have the same shape. name is the file's option name, code the
// error code of a bad file.
func loadModelConfig(path, name, code string) (*evalengine.ModelEnv, error) {
	data, err := readCapped(name, path, maxConfigFileBytes)
	if err != nil {
		return nil, err
	}
	var jc judgeConfigFile
	if err := jsonlimit.Unmarshal(data, jsonlimit.Limits{MaxBytes: maxConfigFileBytes}, &jc); err != nil {
		reason := jsonlimit.ErrorCode(err)
		if reason == "" {
			reason = "invalid_json"
		}
		detail := ""
		var je *jsonlimit.Error
		if errors.As(err, &je) && je.Key != "" {
			detail = je.Key
		}
		return nil, &cliError{Code: code, Reason: reason, Detail: detail, Err: err}
	}
	bad := func(key string) error { return &cliError{Code: code, Reason: key} }
	if jc.Provider != evalengine.ProviderGemini && jc.Provider != evalengine.ProviderOpenAI {
		return nil, bad("provider")
	}
	if jc.Provider == evalengine.ProviderOpenAI && jc.Model == "" {
		return nil, bad("model")
	}
	if jc.TimeoutMS < 0 || jc.TimeoutMS > maxJudgeHTTPTimeoutMS {
		return nil, bad("timeout_ms")
	}
	pc := map[string]any{}
	if jc.BaseURL != "" {
		pc["base_url"] = jc.BaseURL
	}
	if jc.APIKeyEnv != "" {
		if os.Getenv(jc.APIKeyEnv) == "" {
			return nil, &cliError{Code: code, Reason: "api_key_env_unset", Detail: jc.APIKeyEnv}
		}
		pc["api_key_env"] = jc.APIKeyEnv
	}
	if jc.RateLimit != nil {
		if _, err := ratelimit.ParseSpec(jc.RateLimit); err != nil {
			var ce *ratelimit.ConfigError
			if errors.As(err, &ce) {
				return nil, &cliError{Code: code, Reason: ce.Key, Detail: ce.Detail}
			}
			return nil, bad("rate_limit")
		}
		var v any
		_ = json.Unmarshal(jc.RateLimit, &v) // ParseSpec accepted it
		pc["rate_limit"] = v
	}
	env := &evalengine.ModelEnv{Provider: jc.Provider, Model: jc.Model, ProviderConfig: pc}
	// timeout_ms bounds each attempt inside the providers' own call path
	// (an http.Client of ours would keep judges off the tuned transport
	// and the lean path, and report a slow attempt as a transport error).
	env.AttemptTimeoutMS = jc.TimeoutMS
	return env, nil
}

// judgeSecrets are the values the judge's key variable holds (named, or
// the provider's default), for scrubbing error output.
func judgeSecrets(env *evalengine.ModelEnv) []string {
	if env == nil {
		return nil
	}
	name, _ := env.ProviderConfig["api_key_env"].(string)
	if name == "" {
		name = evalengine.DefaultGeminiAPIKeyEnv
		if env.Provider == evalengine.ProviderOpenAI {
			name = evalengine.DefaultOpenAIAPIKeyEnv
		}
	}
	if s := os.Getenv(name); len(s) >= 4 {
		return []string{s}
	}
	return nil
}
