// Package model holds the provider-neutral LLM types (messages, parts, tool
// calls, requests, responses, usage) and the Provider interface that every
// model client implements. Providers live in subpackages (scripted, openai,
// gemini).
//
// It is a leaf: the plugin pipeline and the runtime both import it, and it
// imports nothing from adk but internal.
package model
