// Package session holds events and sessions: the ordered record of one
// conversation and its state. It is a leaf shared by the runtime and the
// plugin pipeline; it imports only agent/model and internal.
package session
