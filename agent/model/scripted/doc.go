// Package scripted is the deterministic model provider: it answers from a
// script of rules and steps instead of calling a model, for tests, demos and
// evals without a network.
//
// The first rule whose match fits the latest user message is used (else the
// default script); the k-th model call since that user message returns
// steps[k], where k is the number of model messages that follow the user
// message in the request. The provider keeps no state between calls, so one
// Provider serves any number of concurrent sessions.
//
// It imports only agent/model and the standard library.
package scripted
