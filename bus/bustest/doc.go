// Package bustest starts the embedded JetStream NATS server that tests of
// the packages above bus run against (a real server, never a mock), so the
// dozen lines of start, connect, wait for JetStream and clean up live in
// one place. Only tests import it.
//
// It is not internal/testutil because it needs bus, and testutil sits
// below every adk package. It imports only bus, nats and the standard
// library.
package bustest
