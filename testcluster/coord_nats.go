package testcluster

import (
	"github.com/fadcedab/adk/bus"
	"github.com/nats-io/nats.go"
)

// WithUsers turns on user/password authentication with these users on
// every node (per-user subject permissions: bus.WorkerPermissions). The
// first user must be unrestricted: the harness uses it for its own
// readiness checks.
func WithUsers(users ...bus.User) Option {
	return func(c *natsConfig) { c.users = append(c.users, users...) }
}

// adminOptions are the credentials the harness itself connects with.
func (c natsConfig) adminOptions() []nats.Option {
	if len(c.users) == 0 {
		return nil
	}
	return []nats.Option{nats.UserInfo(c.users[0].Name, c.users[0].Password)}
}
