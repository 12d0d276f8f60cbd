package bus

import (
	"errors"
)

// Configuration and subject errors.
var (
	// ErrInvalidConfig is wrapped by every *ConfigError.
	ErrInvalidConfig = errors.New("bus: invalid config")
	// ErrInvalidToken reports a subject token (an id, kind or op) that is
	// empty, too long, or holds a character outside [A-Za-z0-9_-].
	ErrInvalidToken = errors.New("bus: invalid subject token")
	// ErrServerNotReady reports an embedded server that did not become ready
	// for connections within its timeout.
	ErrServerNotReady = errors.New("bus: server not ready")
)

// ConfigError reports one invalid ServerConfig field. It matches
// ErrInvalidConfig under errors.Is.
type ConfigError struct {
	// Field is the ServerConfig field name, e.g. "Port" or "Cluster.Routes".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return "bus: invalid config: " + e.Field + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }
