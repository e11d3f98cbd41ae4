package bench

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// S3 prices in US dollars per million requests (S3 Standard, us-east-1):
// a PUT $5 (0.005 per 1,000), a GET $0.40 (0.0004 per 1,000), a DELETE
// nothing. Transfer between SQS, S3 and the caller in one region is free.
const (
	s3PutPerMillion = 5.0
	s3GetPerMillion = 0.40
)

// benchBucket is the bucket the in-memory store says it holds.
const benchBucket = "tqbench-payloads"

// memStore is the benchmark's S3: an sqsapi.PayloadStore that keeps its
// objects in memory, counts its calls (a Put, Get or Delete each stands
// for one S3 request) and the bytes they move, and waits latency before
// each call answers, as sqstest waits before each SQS call. It moves no
// bytes over a socket, so a body through it costs the benchmark no HTTP
// or JSON work, where one through SQS does: a store on S3 would add its
// own. Safe for concurrent use.
type memStore struct {
	latency time.Duration

	mu      sync.Mutex
	objects map[string][]byte
	calls   map[string]int64 // by operation: Put, Get, Delete
	bytes   int64            // put and got
}

var _ sqsapi.PayloadStore = (*memStore)(nil)

func newMemStore(latency time.Duration) *memStore {
	return &memStore{latency: latency, objects: make(map[string][]byte), calls: make(map[string]int64)}
}

// call counts one call of op moving n bytes, then waits the latency.
func (s *memStore) call(ctx context.Context, op string, n int) error {
	s.mu.Lock()
	s.calls[op]++
	s.bytes += int64(n)
	s.mu.Unlock()
	return sleep(ctx, s.latency)
}

func (s *memStore) Put(ctx context.Context, key string, body []byte) (string, error) {
	if err := s.call(ctx, "Put", len(body)); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.objects[key] = append([]byte(nil), body...)
	s.mu.Unlock()
	return benchBucket, nil
}

func (s *memStore) Get(ctx context.Context, bucket, key string) ([]byte, error) {
	s.mu.Lock()
	b, ok := s.objects[key]
	s.mu.Unlock()
	if err := s.call(ctx, "Get", len(b)); err != nil {
		return nil, err
	}
	if !ok || bucket != benchBucket {
		return nil, sqsapi.ErrPayloadNotFound
	}
	return b, nil // never written again: Put stores a copy
}

func (s *memStore) Delete(ctx context.Context, bucket, key string) error {
	if err := s.call(ctx, "Delete", 0); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.objects, key)
	s.mu.Unlock()
	return nil
}

// storeTally is what a memStore has counted at one moment.
type storeTally struct {
	calls map[string]int64
	bytes int64
}

func (s *memStore) tally() storeTally {
	s.mu.Lock()
	defer s.mu.Unlock()
	return storeTally{calls: maps.Clone(s.calls), bytes: s.bytes}
}

// since returns what was counted between earlier and t.
func (t storeTally) since(earlier storeTally) storeTally {
	out := storeTally{calls: make(map[string]int64), bytes: t.bytes - earlier.bytes}
	for op, n := range t.calls {
		if d := n - earlier.calls[op]; d != 0 {
			out.calls[op] = d
		}
	}
	return out
}

// left returns how many objects the store holds: after a visit's close,
// what its contender left behind.
func (s *memStore) left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects)
}

// s3Dollars is what S3 bills for calls, by operation, in dollars per
// million.
func s3Dollars(calls map[string]int64) float64 {
	return float64(calls["Put"])*s3PutPerMillion + float64(calls["Get"])*s3GetPerMillion
}

// extendedThreshold is where AWS's SQS Extended Client Libraries for Java
// (2.x) and Python send a message through S3 by default: when its body
// and message attributes together take more than 256 KiB (their
// payloadSizeThreshold and message_size_threshold, 262,144 bytes).
const extendedThreshold = 256 << 10

// offloadLarge is the sending half of an extended client at its defaults:
// a message whose body and attributes are over extendedThreshold has its
// body put in store under a bare UUID (their keys) and replaced by a
// pointer, with payload.SizeAttribute added to attrs. Other bodies are
// returned as they are. No compression: the extended clients have none.
func offloadLarge(ctx context.Context, store sqsapi.PayloadStore, body string, attrs map[string]types.MessageAttributeValue) (string, error) {
	if wire.MessageSize(&body, attrs) <= extendedThreshold {
		return body, nil
	}
	key := uuid.NewString()
	bucket, err := store.Put(ctx, key, []byte(body))
	if err != nil {
		return "", err
	}
	attrs[payload.SizeAttribute] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(len(body)))}
	return payload.Pointer{Bucket: bucket, Key: key}.String(), nil
}

// fetchLarge is the receiving half: a message whose body is a pointer gets
// the object's body, and its receipt handle marked with the bucket and
// key, as an extended client hands it to its caller, so that the delete
// of the message deletes the object too (deleter.send).
func fetchLarge(ctx context.Context, store sqsapi.PayloadStore, m types.Message) (types.Message, error) {
	out, p, ok, err := payload.Fetch(ctx, store, m)
	if err != nil || !ok {
		return m, err
	}
	out.ReceiptHandle = aws.String(p.ReceiptHandle(aws.ToString(m.ReceiptHandle)))
	return out, nil
}

// drop drops every object and returns how many there were.
func (s *memStore) drop() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.objects)
	clear(s.objects)
	return n
}

// offloader is a contender that carries bodies over SQS's maximum through
// its payload store.
type offloader interface{ offloads() bool }
