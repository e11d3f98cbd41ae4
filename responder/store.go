package responder

import (
	"container/heap"
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
	// when the handler returned none; for a request with a reply stream,
	// the end mark that ended the stream, which a replay sends again).
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
// Serve calls Begin when a request arrives, Renew with each visibility
// extension while
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

// memoryStore is the Store NewMemoryStore returns. It owns no goroutine:
// each call first drops a bounded number of expired entries (oldest
// expiry first, from a heap), so no call pauses to scan the whole store.
// The zero value is ready to use.
type memoryStore struct {
	mu      sync.Mutex
	entries map[string]*memEntry
	expiry  expiryHeap       // one record per write; stale records are skipped
	now     func() time.Time // tests
}

type memEntry struct {
	token   string
	done    bool
	reply   *Reply
	expires time.Time // of the lease, or of the stored reply
}

// expiryRecord says that key's entry e expires at. It is stale once the key
// holds another entry or e.expires moved later (Renew pushes a new record).
type expiryRecord struct {
	at  time.Time
	key string
	e   *memEntry
}

// expiryHeap is a min-heap of records by at.
type expiryHeap []expiryRecord

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryRecord)) }
func (h *expiryHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = expiryRecord{} // let the entry go
	*h = old[:len(old)-1]
	return r
}

// NewMemoryStore returns an empty in-process Store: it deduplicates the
// redeliveries that reach the same process only. It holds every answer
// for its TTL (Options.StoreTTL, default 1 h): at 1,000 requests a second
// that is 3.6 million entries, each with its reply; for such volumes, or
// to deduplicate across processes, use a shared Store such as
// redisstore. It is safe for concurrent use.
func NewMemoryStore() Store { return new(memoryStore) }

// memSweepMax bounds the expired records a call removes: a call adds at most
// one record, so the store keeps up while no call pauses for long.
const memSweepMax = 64

func (s *memoryStore) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// lockedNow returns the time after dropping up to memSweepMax expired
// records and the entries they still stand for.
func (s *memoryStore) lockedNow() time.Time {
	now := s.clock()
	if s.entries == nil {
		s.entries = make(map[string]*memEntry)
	}
	for n := 0; n < memSweepMax && len(s.expiry) > 0 && !now.Before(s.expiry[0].at); n++ {
		r := heap.Pop(&s.expiry).(expiryRecord)
		if s.entries[r.key] == r.e && !now.Before(r.e.expires) {
			delete(s.entries, r.key)
		}
	}
	return now
}

// lockedPut stores e under key and records when it expires.
func (s *memoryStore) lockedPut(key string, e *memEntry) {
	s.entries[key] = e
	heap.Push(&s.expiry, expiryRecord{at: e.expires, key: key, e: e})
}

// Begin implements Store.
func (s *memoryStore) Begin(_ context.Context, key, token string, lease time.Duration) (Entry, error) {
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
	s.lockedPut(key, &memEntry{token: token, expires: now.Add(lease)})
	return Entry{Status: Acquired}, nil
}

// Renew implements Store.
func (s *memoryStore) Renew(_ context.Context, key, token string, lease time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.lockedNow()
	e := s.entries[key]
	if e == nil || e.done || e.token != token || !now.Before(e.expires) {
		return ErrLeaseLost
	}
	e.expires = now.Add(lease)
	heap.Push(&s.expiry, expiryRecord{at: e.expires, key: key, e: e})
	return nil
}

// Complete implements Store.
func (s *memoryStore) Complete(_ context.Context, key, _ string, reply *Reply, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.lockedNow()
	s.lockedPut(key, &memEntry{done: true, reply: reply.clone(), expires: now.Add(ttl)})
	return nil
}

// Release implements Store.
func (s *memoryStore) Release(_ context.Context, key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lockedNow()
	if e := s.entries[key]; e != nil && !e.done && e.token == token {
		delete(s.entries, key)
	}
	return nil
}

// len returns the number of entries held, expired ones not yet swept
// included.
func (s *memoryStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
