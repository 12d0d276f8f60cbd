// Package samplescope is one eval sample's cancel scope, shared by the
// code that owns it (the eval engine's run loop) and the code a sample
// runs through (the agent Runner and the model call path), so that a
// sample makes one cancellable context instead of three nested ones.
//
// Without it a sample made three: the engine's context.WithTimeout, the
// Runner's context.WithCancel around each turn, and each model call's
// context.AfterFunc, which aborts the call's connection when its context
// ends. Each registers with its parent and allocates a children map and a
// done channel; together they were the largest adk-own CPU site per
// sample (bench/RESULTS.md, session 18 (h24p)).
//
// A Scope belongs to one engine worker, which runs one sample at a time
// (Run's workers, and a fleet worker's run slots through
// evalengine.SampleSlot). New registers it once with the worker's
// context (one context.AfterFunc per worker, not per call). Per sample, the engine makes the sample's
// context as before (context.WithTimeout: a real context, so
// DeadlineExceeded, Canceled and context.Cause are Go's own) and lends it
// to the scope with Begin; End cancels it and takes the scope back.
// Between the two:
//
//   - a Runner that gets the sample's context claims the scope for its
//     turn (ClaimRun) instead of deriving a context of its own: its
//     context is the sample's and ends when the sample ends (not when the
//     turn does), and a consumer that stops iterating cancels the sample
//     (CancelSample);
//   - a model call arms its abort on the scope (Arm) instead of
//     registering with the context: the scope runs it when the worker's
//     context ends, once the sample's context is done, and the call stops
//     itself at the sample's deadline (Arm returns it) with the attempt
//     timer it arms anyway.
//
// Only a context whose Done channel is the current sample's may use the
// scope: a context derived from it (a tool's timeout, a parallel
// branch's cancel, a plugin's hook context), a previous sample's context
// kept by a stray goroutine, a second Runner (nested in the first) or a
// second call while one is armed gets no token from ClaimRun or Arm, and
// its caller makes its own scope as it always did. A nil *Scope gives no
// token either. Tokens make a stray goroutine's late ReleaseRun, Disarm
// or CancelSample touch nothing of the next sample.
//
// A sample's errors stay Go's own: the sample's context is a real
// context.WithTimeout, so a timeout is context.DeadlineExceeded, a
// cancel from above (Ctrl-C, a job's cancel) is Canceled, and
// context.Cause names the cause, for the Runner, its tools and plugins,
// and the model call, which sees its context done before it is aborted.
//
// It imports only the standard library.
package samplescope
