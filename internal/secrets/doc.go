// Package secrets is the one implementation of the contract's secret
// handling: which map keys are sensitive (IsSensitiveKey), removing those
// entries from nested values before anything is persisted or exported
// (Prune), and replacing known secret values inside strings (Redactor).
//
// Every package that stores, logs, exports or forwards user or provider data
// goes through here, so the rule lives in one place.
//
// It must not import any adk package outside internal.
package secrets
