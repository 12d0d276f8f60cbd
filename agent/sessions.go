package agent

import (
	"maps"
	"sync"

	"github.com/fadcedab/adk/agent/session"
)

// InMemorySessionService holds sessions in memory: ordered events and
// state, with each appended event's state delta applied as it is appended.
// It is safe for concurrent use; its lock is never held across a callback.
type InMemorySessionService struct {
	mu sync.Mutex
	// first is the first session created, stored in firstAlloc (used
	// once, so a deleted first session's events are never overwritten):
	// an eval sample's service holds one session, and a map for it was
	// three of the sample's allocations. Later sessions go in sessions,
	// made by the second.
	first      *session.Session // nil: none, or deleted
	firstUsed  bool
	firstAlloc newSessionAlloc
	sessions   map[string]*session.Session
}

// NewInMemorySessionService returns an empty service.
func NewInMemorySessionService() *InMemorySessionService {
	return &InMemorySessionService{}
}

// lookupLocked returns the stored session with that id, or nil.
func (s *InMemorySessionService) lookupLocked(id string) *session.Session {
	if s.first != nil && s.first.ID == id {
		return s.first
	}
	return s.sessions[id]
}

// Create creates an empty session, or returns the existing one with that id
// when it belongs to the same app and user.
func (s *InMemorySessionService) Create(appName, userID, id string) (*session.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createLocked(appName, userID, id)
}

func (s *InMemorySessionService) createLocked(appName, userID, id string) (*session.Session, error) {
	cur, err := s.ensureLocked(appName, userID, id)
	if err != nil {
		return nil, err
	}
	return copySession(cur), nil
}

// ensure is Create for a caller that does not read the session (a run
// starting): no copy is made.
func (s *InMemorySessionService) ensure(appName, userID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.ensureLocked(appName, userID, id)
	return err
}

// ensureLocked returns the stored session with that id, created if absent.
func (s *InMemorySessionService) ensureLocked(appName, userID, id string) (*session.Session, error) {
	if id == "" {
		return nil, &Error{Code: CodeInvalidRunRequest, Detail: "empty session id"}
	}
	if cur := s.lookupLocked(id); cur != nil {
		if cur.AppName != appName || cur.UserID != userID {
			return nil, &Error{Code: CodeSessionNotFound, Detail: "session belongs to another app or user"}
		}
		return cur, nil
	}
	// State is made by the first state delta (copySession gives readers
	// an empty one): most sessions of an eval run never hold state.
	// Room for a turn's two events (the user's message and the answer).
	var b *newSessionAlloc
	if !s.firstUsed {
		b, s.firstUsed = &s.firstAlloc, true
	} else {
		b = &newSessionAlloc{}
	}
	b.sess = session.Session{ID: id, AppName: appName, UserID: userID, Events: b.events[:0:len(b.events)]}
	switch {
	case s.first == nil:
		s.first = &b.sess
	case s.sessions == nil:
		s.sessions = map[string]*session.Session{id: &b.sess}
	default:
		s.sessions[id] = &b.sess
	}
	return &b.sess, nil
}

// newSessionAlloc is a new session with room for two events, in one
// allocation (ensureLocked).
type newSessionAlloc struct {
	sess   session.Session
	events [2]session.Event
}

// Get returns a copy of the session: its events slice and state map are
// the caller's (events' contents are shared and must not be modified).
func (s *InMemorySessionService) Get(id string) (*session.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.lookupLocked(id)
	if cur == nil {
		return nil, ErrSessionNotFound
	}
	return copySession(cur), nil
}

// Delete removes a session.
func (s *InMemorySessionService) Delete(id string) {
	s.mu.Lock()
	if s.first != nil && s.first.ID == id {
		s.first = nil
	} else {
		delete(s.sessions, id)
	}
	s.mu.Unlock()
}

// Append appends ev to the session and applies its state delta.
func (s *InMemorySessionService) Append(id string, ev *session.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.lookupLocked(id)
	if cur == nil {
		return ErrSessionNotFound
	}
	cur.Events = append(cur.Events, *ev)
	if len(ev.Actions.StateDelta) > 0 && cur.State == nil {
		cur.State = make(map[string]any, len(ev.Actions.StateDelta))
	}
	for k, v := range ev.Actions.StateDelta {
		cur.State[k] = v
	}
	return nil
}

// withEvents calls fn with the first n events of the session (all when n
// < 0), under the service's lock, so that a reader that only copies what
// it needs (an agent's history) does not copy the events first. fn must
// not call s and must not keep the slice or change the events.
func (s *InMemorySessionService) withEvents(id string, n int, fn func([]session.Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var evs []session.Event
	if cur := s.lookupLocked(id); cur != nil {
		evs = cur.Events
	}
	if n >= 0 && n < len(evs) {
		evs = evs[:n]
	}
	fn(evs)
}

// eventCount returns the number of events of the session.
func (s *InMemorySessionService) eventCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.lookupLocked(id); cur != nil {
		return len(cur.Events)
	}
	return 0
}

func copySession(s *session.Session) *session.Session {
	c := *s
	c.Events = append([]session.Event(nil), s.Events...)
	c.State = maps.Clone(s.State)
	if c.State == nil {
		c.State = map[string]any{}
	}
	return &c
}
