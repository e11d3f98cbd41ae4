package responder

import (
	"context"
	"sync"
	"time"
)

// Status is the state of a request id in a Store.
type Status int

const (
	// Acquired: the caller now holds the request's lease and runs the
	// handler.
	Acquired Status = iota
	// InProgress: another holder's lease is live; the caller must not run
	// the handler.
	InProgress
	// Done: the request was answered; Entry.Reply is the stored reply (nil
	// when the handler returned none).
	Done
)

func (s Status) String() string {
	switch s {
	case Acquired:
		return "acquired"
	case InProgress:
		return "in progress"
	case Done:
		return "done"
	}
	return "unknown"
}

// Entry is the result of Store.Begin.
type Entry struct {
	Status Status
	Reply  *Reply // for Done
}

// Store is an idempotency store keyed by request id, shared by the
// responders that must not handle a request twice. It holds, per key,
// either a lease (an owner token and an expiry) or a stored reply with a
// TTL. Every method must be safe for concurrent use.
//
// The methods map onto Redis (the nested module
// github.com/tempqueues/tempqueues/redisstore): Begin is SET <key> <token>
// NX PX <lease>, else a look at what holds the key; Renew and Release are
// compare-token-then-PEXPIRE / -DEL scripts; Complete replaces the lease
// with the encoded reply, SET <key> <reply> PX <ttl>. The package
// responder/storetest checks an implementation against this contract.
//
// Serve calls Begin when a request arrives, Renew from its heartbeat while
// the handler runs (the lease is about one visibility timeout long, so the
// lease of a crashed responder expires when its request reappears),
// Complete after a successful handler, and Release after a failed one.
type Store interface {
	// Begin looks key up: Done with the stored reply if it was answered;
	// InProgress if another token holds a live lease; otherwise it takes
	// the lease for token for the given duration and returns Acquired.
	Begin(ctx context.Context, key, token string, lease time.Duration) (Entry, error)
	// Renew extends token's lease on key; ErrLeaseLost if token no longer
	// holds it.
	Renew(ctx context.Context, key, token string, lease time.Duration) error
	// Complete stores reply (which may be nil) as key's answer for ttl and
	// drops the lease. It stores the answer even if token lost its lease:
	// an answer is an answer.
	Complete(ctx context.Context, key, token string, reply *Reply, ttl time.Duration) error
	// Release drops token's lease on key, if it still holds it, so that a
	// redelivery can run the handler again.
	Release(ctx context.Context, key, token string) error
}

// MemoryStore is an in-process Store: it deduplicates the redeliveries that
// reach the same process only. Expired entries are removed lazily by the
// calls themselves, so it owns no goroutine. The zero value is ready to use.
type MemoryStore struct {
	mu        sync.Mutex
	entries   map[string]*memEntry
	nextSweep time.Time
	now       func() time.Time // tests
}

type memEntry struct {
	token   string
	done    bool
	reply   *Reply
	expires time.Time // of the lease, or of the stored reply
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return new(MemoryStore) }

// memSweepEvery bounds how often a call scans the whole map for expired
// entries; between sweeps expired entries are ignored when met.
const memSweepEvery = 30 * time.Second

func (s *MemoryStore) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// lockedNow returns the time and drops expired entries when a sweep is due.
func (s *MemoryStore) lockedNow() time.Time {
	now := s.clock()
	if s.entries == nil {
		s.entries = make(map[string]*memEntry)
	}
	if now.After(s.nextSweep) {
		for k, e := range s.entries {
			if !now.Before(e.expires) {
				delete(s.entries, k)
			}
		}
		s.nextSweep = now.Add(memSweepEvery)
	}
	return now
}

// Begin implements Store.
func (s *MemoryStore) Begin(_ context.Context, key, token string, lease time.Duration) (Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.lockedNow()
	if e := s.entries[key]; e != nil && now.Before(e.expires) {
		if e.done {
			return Entry{Status: Done, Reply: e.reply.clone()}, nil
		}
		if e.token != token {
			return Entry{Status: InProgress}, nil
		}
	}
	s.entries[key] = &memEntry{token: token, expires: now.Add(lease)}
	return Entry{Status: Acquired}, nil
}

// Renew implements Store.
func (s *MemoryStore) Renew(_ context.Context, key, token string, lease time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.lockedNow()
	e := s.entries[key]
	if e == nil || e.done || e.token != token || !now.Before(e.expires) {
		return ErrLeaseLost
	}
	e.expires = now.Add(lease)
	return nil
}

// Complete implements Store.
func (s *MemoryStore) Complete(_ context.Context, key, _ string, reply *Reply, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.lockedNow()
	s.entries[key] = &memEntry{done: true, reply: reply.clone(), expires: now.Add(ttl)}
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lockedNow()
	if e := s.entries[key]; e != nil && !e.done && e.token == token {
		delete(s.entries, key)
	}
	return nil
}

// Len returns the number of entries held, expired ones not yet swept
// included.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
