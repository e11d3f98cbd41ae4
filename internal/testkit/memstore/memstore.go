// Package memstore is an sqsapi.PayloadStore in memory, for tests: it
// counts its calls, lists what it holds, and can be made to fail.
package memstore

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// Store keeps objects in one bucket, Bucket.
type Store struct {
	Bucket string

	mu      sync.Mutex
	objects map[string][]byte
	puts    int
	gets    int
	deletes int
	down    bool
}

// New returns an empty store of bucket.
func New(bucket string) *Store { return &Store{Bucket: bucket, objects: map[string][]byte{}} }

// SetDown makes every call fail, as a store out of reach, or work again.
func (s *Store) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// Put implements sqsapi.PayloadStore.
func (s *Store) Put(_ context.Context, key string, body []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return "", fmt.Errorf("memstore: put s3://%s/%s: store out of reach", s.Bucket, key)
	}
	s.puts++
	s.objects[key] = append([]byte(nil), body...)
	return s.Bucket, nil
}

// Get implements sqsapi.PayloadStore.
func (s *Store) Get(_ context.Context, bucket, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, fmt.Errorf("memstore: get s3://%s/%s: store out of reach", bucket, key)
	}
	s.gets++
	b, ok := s.objects[key]
	if !ok || bucket != s.Bucket {
		return nil, fmt.Errorf("memstore: get s3://%s/%s: %w", bucket, key, sqsapi.ErrPayloadNotFound)
	}
	return b, nil
}

// Delete implements sqsapi.PayloadStore.
func (s *Store) Delete(_ context.Context, bucket, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return fmt.Errorf("memstore: delete s3://%s/%s: store out of reach", bucket, key)
	}
	s.deletes++
	if bucket == s.Bucket {
		delete(s.objects, key)
	}
	return nil
}

// Keys returns the keys of the objects it holds, sorted.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Calls returns the counts of Put, Get and Delete calls that reached it.
func (s *Store) Calls() (puts, gets, deletes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts, s.gets, s.deletes
}
