// Package loopback picks free loopback addresses for processes that must
// be named before they listen (Raft peers in --peers, a NATS config file):
// the test suites and the fleet bench start real adk processes that way.
//
// FreeAddrs holds every listener it opened until it has all n, so one call
// never returns the same port twice (the kernel may hand a just-closed port
// out again: picking one at a time could give two Raft peers one address).
// An address is only free "a moment ago": a process outside the caller may
// still take it before it is bound, which callers accept as a start error.
//
// It imports only the standard library.
package loopback
