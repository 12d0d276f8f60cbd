// Package googleadk imports Google ADK (adk-python) evaluation files:
// EvalSet documents (snake_case or camelCase) and legacy .test.json lists
// become sets, test_config.json criteria map onto adk's
// (ParseGoogleTestConfig), and conversation_scenario cases run through
// the LLM user simulator (ScenarioRouter, GoogleScenarioUser).
// evalengine's doc.go ("Google ADK import") gives the mapping.
// evalengine re-exports every name a caller uses; callers outside
// evalengine never import this package.
//
// LoadSet lives here because it is where a set's shape is detected: a
// native set goes to the core's decoder, a Google one is converted. It
// builds on evalengine/internal/evalcore, evalengine/internal/simulation
// and evalengine/internal/llm. It must not import evalengine,
// evalengine/internal/report, bus, coordinator, worker, store or devapi.
package googleadk
