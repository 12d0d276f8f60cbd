// Command adk is the one binary of the project: local and distributed eval
// runs, trace queries, and the server roles (serve, coordinator, worker).
//
// Exit codes are part of the interface: 0 success, 2 evaluated but failed or
// regressed, 1 any error, printed as one line on stderr.
package main
