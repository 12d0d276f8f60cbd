// Package internal groups the small pieces every other package shares: the
// bounded JSON reader (jsonlimit), secret pruning (secrets), canonical JSON
// and digests (canonjson), free loopback addresses for processes named
// before they listen (loopback), a writer that counts its bytes
// (iocount), an eval sample's cancel scope that the engine, the agent
// Runner and the model call path share (samplescope), and test helpers
// (testutil).
//
// Nothing under internal may import another adk package outside internal.
package internal
