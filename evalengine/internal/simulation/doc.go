// Package simulation is the provider-free simulation loop of CONTRACTS
// §5.14: RunSimulation drives a UserSimulator, the agent Session and an
// optional EnvironmentSimulator (each agent tool call is an effect) on the
// caller's goroutine, with a step ceiling, a deadline per callback and
// plain-JSON, size-bounded crossings. evalengine re-exports every name a
// caller uses; callers outside evalengine never import this package.
//
// The loop knows nothing of models: the LLM-backed user lives in
// evalengine/internal/llm and the Google conversation_scenario routing in
// evalengine/internal/googleadk, both above this package. It imports only
// evalengine/internal/evalcore and the standard library. It must not
// import evalengine, agent, bus, coordinator, worker, store or devapi.
package simulation
