package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// DefaultPrefix is the key prefix of a Store made without Options.Prefix.
const DefaultPrefix = "tempqueues:idem:"

// ErrBadRecord is matched (errors.Is) by the error of a call that found a
// value under its key that it cannot read: one written by something else,
// or an answer in a record format this release does not know. Begin
// returns it rather than run the handler a second time.
var ErrBadRecord = errors.New("redisstore: unreadable record")

// Options configure a Store. Zero values mean the documented defaults.
type Options struct {
	// Prefix starts every key the Store writes; the request id follows it.
	// Give each service its own, so that request ids cannot collide.
	// Default DefaultPrefix.
	Prefix string
	// Logger receives the Store's operational warnings (answers stored
	// over a lost lease); nil means slog.Default().
	Logger *slog.Logger
}

// Store is a responder.Store on Redis, shared by every responder that
// talks to the same Redis. It holds no state of its own besides its
// configuration and is safe for concurrent use.
type Store struct {
	rdb    redis.Scripter
	prefix string
	log    *slog.Logger

	begin, renew, release, complete *redis.Script
}

var _ responder.Store = (*Store)(nil)

// New returns a Store on rdb: a *redis.Client, *redis.ClusterClient,
// *redis.Ring or redis.UniversalClient. Every call touches a single key, so
// a cluster works. The Store does not close rdb. A nil rdb, typed nil
// included, is an *sqsapi.InvalidInputError: it would otherwise panic in
// the responder's workers on the first request.
func New(rdb redis.Scripter, optFns ...func(*Options)) (*Store, error) {
	if err := checkClient(rdb); err != nil {
		return nil, err
	}
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Store{
		rdb:      rdb,
		prefix:   o.Prefix,
		log:      o.Logger,
		begin:    redis.NewScript(beginScript),
		renew:    redis.NewScript(renewScript),
		release:  redis.NewScript(releaseScript),
		complete: redis.NewScript(completeScript),
	}, nil
}

// checkClient rejects a nil client and a typed nil one (a nil
// *redis.Client in the interface). It is the module's own copy of the
// check the core module keeps in internal/wire: this module is versioned
// apart from the core, so it does not import the core's internal packages.
func checkClient(rdb redis.Scripter) error {
	bad := rdb == nil
	if !bad {
		switch v := reflect.ValueOf(rdb); v.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface, reflect.UnsafePointer:
			bad = v.IsNil()
		}
	}
	if bad {
		return &sqsapi.InvalidInputError{Op: "redisstore.New", Param: "rdb", Reason: fmt.Sprintf("must not be a nil %T", rdb)}
	}
	return nil
}

// The scripts. KEYS[1] is the request's key; ARGV[1] the caller's lock
// value (lockTag + token). Redis runs each atomically.
const (
	// Begin: take the lease if the key is free, or keep it for its owner
	// with the new length; else report who holds the key.
	// Returns {0} acquired, {1} held by another token, {2, value} answered.
	beginScript = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0}
end
local v = redis.call('GET', KEYS[1])
if not v then
  -- unreachable: a script sees a single instant, and SET NX found the key
  return redis.error_reply('key vanished during the script')
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {0}
end
if string.sub(v, 1, 2) == 'L:' then
  return {1}
end
return {2, v}
`
	// Renew: compare the owner, then set the lease's new length.
	// Returns 1 renewed, 0 not the owner (expired, released, answered, taken).
	renewScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`
	// Release: compare the owner, then delete. Returns 1 deleted, 0 not
	// the owner.
	releaseScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`
	// Complete: replace whatever is there by the answer ARGV[2] for ARGV[3]
	// milliseconds, and say what was replaced: 1 the caller's own lease,
	// 0 nothing (the lease had expired), 2 another owner's lease, 3 an
	// answer.
	completeScript = `
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if v == ARGV[1] then
  return 1
elseif not v then
  return 0
elseif string.sub(v, 1, 2) == 'L:' then
  return 2
end
return 3
`
)

func (s *Store) key(id string) string { return s.prefix + id }

// millis is d in whole milliseconds, rounded up, at least 1: Redis expiries
// are milliseconds and must be positive.
func millis(d time.Duration) int64 {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return int64(max(ms, 1))
}

func checkArgs(op, key, token string) error {
	switch {
	case key == "":
		return &sqsapi.InvalidInputError{Op: "redisstore." + op, Param: "key", Reason: "empty"}
	case token == "":
		return &sqsapi.InvalidInputError{Op: "redisstore." + op, Param: "token", Reason: fmt.Sprintf("empty (key %q)", key)}
	}
	return nil
}

// Begin implements responder.Store: one script call that takes the lease
// (SET NX PX) if the key is free, or returns the stored answer, or
// InProgress. A lease or TTL is rounded up to whole milliseconds, at least
// one.
func (s *Store) Begin(ctx context.Context, key, token string, lease time.Duration) (responder.Entry, error) {
	if err := checkArgs("Begin", key, token); err != nil {
		return responder.Entry{}, err
	}
	res, err := s.begin.Run(ctx, s.rdb, []string{s.key(key)}, lockTag+token, millis(lease)).Slice()
	if err != nil {
		return responder.Entry{}, fmt.Errorf("redisstore: Begin %q: %w", key, err)
	}
	if len(res) == 0 {
		return responder.Entry{}, fmt.Errorf("redisstore: Begin %q: %w: script returned nothing", key, ErrBadRecord)
	}
	switch status, _ := res[0].(int64); {
	case status == 0 && len(res) == 1:
		return responder.Entry{Status: responder.Acquired}, nil
	case status == 1 && len(res) == 1:
		return responder.Entry{Status: responder.InProgress}, nil
	case status == 2 && len(res) == 2:
		v, _ := res[1].(string)
		reply, err := decodeDone(v)
		if err != nil {
			return responder.Entry{}, fmt.Errorf("redisstore: Begin %q: %w: %v", key, ErrBadRecord, err)
		}
		return responder.Entry{Status: responder.Done, Reply: reply}, nil
	}
	return responder.Entry{}, fmt.Errorf("redisstore: Begin %q: %w: unexpected script result %v", key, ErrBadRecord, res)
}

// Renew implements responder.Store: compare the owner token, then
// PEXPIRE. It returns an error matching responder.ErrLeaseLost when token
// no longer holds the lease.
func (s *Store) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	if err := checkArgs("Renew", key, token); err != nil {
		return err
	}
	n, err := s.renew.Run(ctx, s.rdb, []string{s.key(key)}, lockTag+token, millis(lease)).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: Renew %q: %w", key, err)
	}
	if n != 1 {
		return fmt.Errorf("redisstore: Renew %q: %w", key, responder.ErrLeaseLost)
	}
	return nil
}

// Release implements responder.Store: compare the owner token, then DEL.
// Releasing a lease that token does not hold does nothing.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := checkArgs("Release", key, token); err != nil {
		return err
	}
	if err := s.release.Run(ctx, s.rdb, []string{s.key(key)}, lockTag+token).Err(); err != nil {
		return fmt.Errorf("redisstore: Release %q: %w", key, err)
	}
	return nil
}

// Complete implements responder.Store: the answer replaces the lease in
// one script call and expires after ttl. As the responder.Store contract
// says, the answer is stored even when token no longer holds the lease:
// the handler did run, and its answer is what a later redelivery must get.
// That case is logged, at Warn when another owner held the lease or an
// answer was already there (the handler ran twice).
func (s *Store) Complete(ctx context.Context, key, token string, reply *responder.Reply, ttl time.Duration) error {
	if err := checkArgs("Complete", key, token); err != nil {
		return err
	}
	v, err := encodeDone(reply)
	if err != nil {
		return err
	}
	n, err := s.complete.Run(ctx, s.rdb, []string{s.key(key)}, lockTag+token, v, millis(ttl)).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: Complete %q: %w", key, err)
	}
	switch n {
	case 0:
		s.log.LogAttrs(ctx, slog.LevelDebug, "redisstore: answer stored after its lease expired",
			slog.String("request_id", key))
	case 2:
		s.log.LogAttrs(ctx, slog.LevelWarn, "redisstore: answer stored over another responder's lease; the handler ran twice",
			slog.String("request_id", key))
	case 3:
		s.log.LogAttrs(ctx, slog.LevelWarn, "redisstore: answer replaced an earlier answer; the handler ran twice",
			slog.String("request_id", key))
	}
	return nil
}
