package ratelimit

import (
	"context"
	"errors"

	"github.com/fadcedab/adk/agent/model"
)

// CallerRetries is implemented by providers that can leave 429s to their
// caller (the remote providers' HTTP client retries them itself by
// default, which behind a limiter would be each caller for itself).
type CallerRetries interface {
	LeaveRateLimitsToCaller()
}

// Provider is a model.Provider whose calls go through a Limiter. A call
// answered 429 waits (with every other caller of the limiter, for the
// Retry-After) and is retried until the caller's context ends: a
// throttled call is late, not failed.
type Provider struct {
	inner model.Provider
	l     *Limiter
}

// Wrap puts p behind l; p must not be used otherwise afterwards (its own
// 429 retries are turned off).
func Wrap(p model.Provider, l *Limiter) *Provider {
	if c, ok := p.(CallerRetries); ok {
		c.LeaveRateLimitsToCaller()
	}
	return &Provider{inner: p, l: l}
}

// Name is the wrapped provider's name.
func (p *Provider) Name() string { return p.inner.Name() }

// Generate waits for the limiter, calls the provider, and retries 429s.
func (p *Provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	est := estimateTokens(req)
	for {
		release, err := p.l.Acquire(ctx, est)
		if err != nil {
			return nil, p.ended(err)
		}
		resp, err := p.inner.Generate(ctx, req)
		used := 0
		if resp != nil {
			used = int(resp.Usage.InputTokens + resp.Usage.OutputTokens)
		}
		var me *model.Error
		if errors.As(err, &me) && me.Class == model.ClassRateLimited {
			if ctx.Err() != nil {
				// The caller's deadline ended the retries, not the
				// provider: the same error as a wait cut short.
				release(used)
				return nil, p.ended(ctx.Err())
			}
			// Paused before the slot is freed: a caller waiting for
			// the slot must find the pause, not slip in between.
			p.l.Throttled(me.RetryAfter)
			release(used)
			continue
		}
		release(used)
		return resp, err
	}
}

// ended is the error of a call its context ended: a timeout past the
// deadline, else cancelled.
func (p *Provider) ended(err error) error {
	class := model.ClassCancelled
	if errors.Is(err, context.DeadlineExceeded) {
		class = model.ClassTimeout
	}
	return &model.Error{Provider: p.inner.Name(), Class: class}
}

// estimateTokens guesses a request's tokens before the call (about four
// characters a token, plus the output bound): the tokens-per-minute
// bucket is charged this up front and the rest after the answer's usage.
func estimateTokens(req *model.Request) int {
	chars := 0
	for _, m := range req.Messages {
		for _, part := range m.Parts {
			chars += len(part.Text)
			if part.ToolCall != nil {
				chars += 64
			}
			if part.ToolResult != nil {
				chars += 64
			}
		}
	}
	return chars/4 + 1 + max(req.MaxOutputTokens, 0)
}
