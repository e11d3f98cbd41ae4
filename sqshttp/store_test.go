package sqshttp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/testkit/memstore"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testbody"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqshttp"
)

// With a PayloadStore on both sides, a body too large for one message
// goes through the store both ways, whole, in streaming and one-reply
// mode; each exchange leaves the store empty once its response body is
// closed. A body of unknown length still streams in parts.
func TestBodiesGoThroughAPayloadStore(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		store := memstore.New("bodies")
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("X-Got", fmt.Sprintf("%d %x", r.ContentLength, sha256.Sum256(body)))
			_, _ = w.Write(body) // echoed: the response as large as the request
		}), func(o *sqshttp.HandlerOptions) { o.PayloadStore = store })
		noise := []byte(testbody.Random(3<<20, 7)) // base64 text: gzip barely shrinks it
		binary := make([]byte, 2<<20)              // random: gzip cannot shrink it
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range binary {
			binary[i] = byte(rng.Uint32())
		}
		nibbles := make([]byte, 900<<10) // binary, half of it gzip can shrink
		for i := range nibbles {
			nibbles[i] = binary[i] & 0x0f
		}
		for _, c := range []struct {
			name          string
			body          []byte
			unsized       bool
			oneReply      bool
			puts, deletes int
		}{
			{"3 MiB text, streaming", noise, false, false, 2, 2},
			{"2 MiB binary, one reply", binary, false, true, 2, 2},
			// Base64 makes it too large; the response fits gzipped, which
			// comes before the store (within the 768 KiB fauxqs takes).
			{"900 KiB binary, up in the store, down compressed", nibbles, false, false, 1, 1},
			{"3 MiB of unknown length: parts up, the store down", noise, true, false, 1, 1},
		} {
			p0, g0, d0 := store.Calls()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			var body io.Reader = bytes.NewReader(c.body)
			if c.unsized {
				body = io.MultiReader(body)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://x/echo", body)
			resp, err := e.client(func(o *sqshttp.TransportOptions) {
				o.PayloadStore = store
				o.DisableStreaming = c.oneReply
			}).Do(req)
			if err != nil {
				cancel()
				t.Fatalf("%s: %v", c.name, err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(got, c.body) {
				t.Fatalf("%s: got %d bytes, %v; want the %d sent", c.name, len(got), err, len(c.body))
			}
			length := int64(len(c.body))
			if c.unsized {
				length = -1
			}
			if want := fmt.Sprintf("%d %x", length, sha256.Sum256(c.body)); resp.Header.Get("X-Got") != want {
				t.Errorf("%s: the handler saw %q, want %q", c.name, resp.Header.Get("X-Got"), want)
			}
			_ = resp.Body.Close()
			cancel()
			p, g, d := store.Calls()
			if p-p0 != c.puts || g-g0 != c.puts || d-d0 != c.deletes {
				t.Errorf("%s: %d puts, %d gets, %d deletes; want %d, %d, %d", c.name, p-p0, g-g0, d-d0, c.puts, c.puts, c.deletes)
			}
			if keys := store.Keys(); len(keys) != 0 {
				t.Errorf("%s: left in the store: %v", c.name, keys)
			}
		}
		// A caller without a store gets a large response in parts, and a
		// small exchange touches no store.
		p0, _, _ := store.Calls()
		resp, err := e.client().Post("http://x/echo", "application/octet-stream", bytes.NewReader(noise))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || !bytes.Equal(got, noise) || resp.ContentLength != -1 {
			t.Fatalf("no store: %d bytes (ContentLength %d), %v", len(got), resp.ContentLength, err)
		}
		resp, err = e.client(func(o *sqshttp.TransportOptions) { o.PayloadStore = store }).Post("http://x/echo", "text/plain", bytes.NewReader([]byte("small")))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if p, _, _ := store.Calls(); p != p0 {
			t.Errorf("%d puts without a large body", p-p0)
		}
	})
}

// A body put in the store is deleted when the exchange fails: here the
// handler has no store, so the request fails (its queue would
// dead-letter it) and the caller times out.
func TestAFailedExchangeLeavesNoObject(t *testing.T) {
	store := memstore.New("bodies")
	e := newEnv(t, sqstestenv.SQSTest(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran without its body")
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://x/", bytes.NewReader([]byte(testbody.Random(2<<20, 3))))
	_, err := e.client(func(o *sqshttp.TransportOptions) { o.PayloadStore = store }).Do(req)
	if !errors.Is(err, requester.ErrTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if puts, _, deletes := store.Calls(); puts != 1 || deletes != 1 || len(store.Keys()) != 0 {
		t.Errorf("%d puts, %d deletes, left %v", puts, deletes, store.Keys())
	}
}
