// Package openai is the model provider for OpenAI-compatible chat
// completions (OpenAI, vLLM, Ollama, llama.cpp, LM Studio): tool calling,
// structured output, usage, per-attempt timeouts, bounded responses and
// retries on 429/5xx only.
//
// Errors are *model.Error values; the API key is read from the environment
// variable the config names and never appears in an error.
//
// Answers are decoded without encoding/json when they have the shape
// providers send (decode.go); anything else is decoded by encoding/json,
// whose value and verdict stand either way. The answer is decoded where
// its connection read it (httpx.PostBorrow), and the connection goes back
// to its pool as Generate returns, so the decoder copies every string it
// keeps and nothing of a Response may alias the answer's bytes
// (TestOpenAI_AnswersOutliveTheirConnection). Requests are written without
// reflection (encode.go), byte for byte what encoding/json gives for the
// request struct.
//
// It imports only agent/model, agent/internal/httpx (the shared HTTP
// helper), internal/jsonquote (the one JSON string quoter) and the
// standard library.
package openai
