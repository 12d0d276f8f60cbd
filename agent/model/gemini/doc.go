// Package gemini is the model provider for the Gemini generateContent REST
// API: function calling, structured JSON output (responseMimeType +
// responseSchema), usage metadata, per-attempt timeouts, bounded responses
// and retries on 429/5xx only.
//
// The API key is sent in the x-goog-api-key header (never in the URL), read
// from the environment variable the config names, and never appears in an
// error.
//
// It imports only agent/model, agent/internal/httpx (the shared HTTP
// helper) and the standard library.
package gemini
