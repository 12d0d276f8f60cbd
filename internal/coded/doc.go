// Package coded is the module's one structured error: a stable contract
// code, an optional nested reason (the contract's tuple form, e.g.
// {invalid_eval_set, eval_data_depth_exceeded}) and a bounded detail naming
// the offending key, case or index, plus an unprinted cause.
//
// Each package that reports such errors declares a Domain (an empty struct
// type giving the message prefix and layout) and aliases Error[ItsDomain]
// as its own Error. Distinct domains are distinct types, so errors.As for
// one package's *Error never catches another package's, as before the
// types were shared; Error(), Is and Unwrap are written once, here.
//
// evalengine, the eval store's records (evalrecord) and the trace store
// (tracestore, whose domain carries the replay gap in Error.Fields) use it.
// The errors of bus/wire (Offset), agent (Agent, Tool) and plugins (Index,
// PluginID, Hook, Limit) keep their own types: each prints those fields in
// its own layout (wire and agent print the cause, which this type never
// does; plugins formats by code and has a JSON shape of its own), so a
// formatting hook would be as long as the Error() it replaced; each type's
// doc says why it stays. coordinator/api's wire error is its own by design
// (it is the RPC contract).
//
// It must not import any adk package outside internal.
package coded
