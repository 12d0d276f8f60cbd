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
// evalengine and the eval store's records (evalrecord) use it. The errors of
// tracestore (Gap), bus/wire (Offset), agent (Agent, Tool) and plugins
// (Index, PluginID, Hook, Limit) keep their own types: callers read those
// fields by name, which a generic type cannot declare, and each prints them
// in its own layout. Embedding this type would nest every literal to save a
// few lines; each type's doc says why it stays. coordinator/api's wire
// error is its own by design (it is the RPC contract).
//
// It must not import any adk package outside internal.
package coded
