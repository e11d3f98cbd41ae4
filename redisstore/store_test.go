package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tempqueues/tempqueues/redisstore"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/responder/storetest"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// The Store keeps the contract NewMemoryStore's keeps: the same checks pass.
func TestConformance(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.client(t)
	storetest.Run(t, func(t *testing.T) responder.Store {
		return mustNew(t, rdb, func(o *redisstore.Options) { o.Prefix = "conformance/" + t.Name() + "/" })
	})
}

func TestKeysAndRecords(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).client(t)
	s := mustNew(t, rdb)
	key := redisstore.DefaultPrefix + "req-1"

	if _, err := s.Begin(ctx, "req-1", "tok", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, key).Val(); v != "L:tok" {
		t.Fatalf("lease stored as %q", v)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 29*time.Second || ttl > 30*time.Second {
		t.Fatalf("lease expiry %v, want about 30s", ttl)
	}
	if err := s.Renew(ctx, "req-1", "tok", time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Fatalf("renewed lease expiry %v, want about 1m", ttl)
	}
	if err := s.Complete(ctx, "req-1", "tok", &responder.Reply{Body: "hi"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, key).Val(); v != `D{"v":1,"reply":{"body":"hi"}}` {
		t.Fatalf("answer stored as %q", v)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("answer expiry %v, want about 1h", ttl)
	}
	if err := s.Complete(ctx, "req-2", "tok", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, redisstore.DefaultPrefix+"req-2").Val(); v != `D{"v":1}` {
		t.Fatalf("nil answer stored as %q", v)
	}

	// Sub-millisecond durations round up to a millisecond rather than fail.
	if _, err := s.Begin(ctx, "tiny", "tok", time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ctx, "zero", "tok", 0); err != nil {
		t.Fatal(err)
	}

	// Prefixes separate stores on one Redis.
	other := mustNew(t, rdb, func(o *redisstore.Options) { o.Prefix = "svc2:" })
	if e, err := other.Begin(ctx, "req-1", "x", time.Minute); err != nil || e.Status != responder.Acquired {
		t.Fatalf("Begin under another prefix = %+v, %v", e, err)
	}
	if v := rdb.Get(ctx, "svc2:req-1").Val(); v != "L:x" {
		t.Fatalf("prefixed key holds %q", v)
	}
}

func TestBadRecords(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).client(t)
	s := mustNew(t, rdb, func(o *redisstore.Options) { o.Prefix = "p:" })
	for name, v := range map[string]string{
		"foreign":        "hello",
		"broken json":    `D{"v":1,"reply":`,
		"future version": `D{"v":2,"reply":{"body":"hi"}}`,
		"no version":     `D{"reply":{"body":"hi"}}`,
		"bad text":       `D{"v":1,"reply":{"body":{"x":1}}}`,
	} {
		rdb.Set(ctx, "p:"+name, v, time.Minute)
		_, err := s.Begin(ctx, name, "tok", time.Minute)
		if !errors.Is(err, redisstore.ErrBadRecord) {
			t.Errorf("%s: Begin = %v, want ErrBadRecord", name, err)
		}
		if err := s.Renew(ctx, name, "tok", time.Minute); !errors.Is(err, responder.ErrLeaseLost) {
			t.Errorf("%s: Renew = %v, want ErrLeaseLost", name, err)
		}
		if err := s.Release(ctx, name, "tok"); err != nil {
			t.Errorf("%s: Release = %v", name, err)
		}
		if got := rdb.Get(ctx, "p:"+name).Val(); got != v {
			t.Errorf("%s: value became %q", name, got)
		}
	}
	// Another kind of value under the key is a Redis error, wrapped.
	rdb.RPush(ctx, "p:list", "x")
	if _, err := s.Begin(ctx, "list", "tok", time.Minute); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Begin on a list = %v, want WRONGTYPE", err)
	}
}

func TestInvalidArguments(t *testing.T) {
	ctx := context.Background()
	// No server needed: the calls fail before any command.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	s := mustNew(t, rdb)
	calls := map[string]func(key, token string) error{
		"Begin":    func(k, tok string) error { _, err := s.Begin(ctx, k, tok, time.Second); return err },
		"Renew":    func(k, tok string) error { return s.Renew(ctx, k, tok, time.Second) },
		"Release":  func(k, tok string) error { return s.Release(ctx, k, tok) },
		"Complete": func(k, tok string) error { return s.Complete(ctx, k, tok, nil, time.Second) },
	}
	for name, call := range calls {
		for _, kt := range [][2]string{{"", "tok"}, {"key", ""}} {
			if err := call(kt[0], kt[1]); err == nil || !strings.Contains(err.Error(), "empty") {
				t.Errorf("%s(%q, %q) = %v, want an empty-argument error", name, kt[0], kt[1], err)
			}
		}
	}
}

func TestContextAndServerErrors(t *testing.T) {
	srv := startRedis(t)
	// No retries: a call on a stopped server fails at once.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	s := mustNew(t, rdb)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func(ctx context.Context) error{
		"Begin":    func(ctx context.Context) error { _, err := s.Begin(ctx, "k", "tok", time.Second); return err },
		"Renew":    func(ctx context.Context) error { return s.Renew(ctx, "k", "tok", time.Second) },
		"Release":  func(ctx context.Context) error { return s.Release(ctx, "k", "tok") },
		"Complete": func(ctx context.Context) error { return s.Complete(ctx, "k", "tok", nil, time.Second) },
	}
	for name, call := range calls {
		if err := call(cancelled); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context = %v, want context.Canceled", name, err)
		}
	}

	srv.stop()
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := call(ctx)
		cancel()
		if err == nil || errors.Is(err, responder.ErrLeaseLost) || !strings.HasPrefix(err.Error(), "redisstore: "+name) {
			t.Errorf("%s with the server gone = %v, want a wrapped connection error", name, err)
		}
	}
}

// syncBuffer is a bytes.Buffer for a logger used from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestCompleteOverAnotherLeaseIsLogged(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).client(t)
	var logs syncBuffer
	s := mustNew(t, rdb, func(o *redisstore.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	if err := s.Complete(ctx, "own", "a", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if logs.String() != "" {
		t.Fatalf("an answer without a rival logged %q", logs.String())
	}
	if _, err := s.Begin(ctx, "rival", "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "rival", "a", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "rival", "c", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "over another responder's lease") || !strings.Contains(out, "replaced an earlier answer") ||
		!strings.Contains(out, "request_id=rival") {
		t.Fatalf("logs:\n%s", out)
	}
}

// A typed nil client used to pass New and panic on the first Begin, in a
// responder's worker.
func TestNewRejectsNilClients(t *testing.T) {
	for name, rdb := range map[string]redis.Scripter{
		"nil":                     nil,
		"typed nil *redis.Client": (*redis.Client)(nil),
		"typed nil *redis.Ring":   (*redis.Ring)(nil),
	} {
		s, err := redisstore.New(rdb)
		var ie *sqsapi.InvalidInputError
		if s != nil || !errors.Is(err, sqsapi.ErrInvalidInput) || !errors.As(err, &ie) || ie.Param != "rdb" {
			t.Errorf("%s: New = %v, %v; want ErrInvalidInput on rdb", name, s, err)
		}
	}
}

// mustNew returns redisstore.New's Store, failing the test on an error.
func mustNew(t testing.TB, rdb redis.Scripter, optFns ...func(*redisstore.Options)) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(rdb, optFns...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
