// Package respcache is the opt-in model response cache of `adk eval run`
// (--cache DIR, ADK_CACHE_DIR): re-running an eval to fix one criterion
// does not pay every model call again.
//
// A response is keyed by the SHA-256 of the provider name, the model
// name, the canonical JSON of the request (sorted keys, RFC 8785) and the
// sample index, so the samples of one case stay distinct draws and any
// change to the prompt, tools or settings is a miss. Values live in an
// embedded Badger store in the directory. Only successful answers are
// stored: errors, refusals (finish reasons content_filter, refusal,
// safety, recitation, blocklist, prohibited_content, spii) and answers
// with neither text nor tool calls never are.
//
// Each value carries the key and a SHA-256 of its payload; a value that
// does not match (a corrupted or edited store) is a miss and is deleted,
// never an answer. A directory Badger cannot open (not a store, another
// process holds it) is a typed error, *Error with Code
// CodeCacheUnavailable.
//
// The store is bounded (Config.MaxBytes, default 1 GiB of entries): past
// the bound the oldest entries are evicted (insertion order, tracked by an
// index of sequence numbers) down to 90 % of it.
//
// It imports agent/model, internal and Badger. It must not import
// coordinator, worker, store or bus.
package respcache
