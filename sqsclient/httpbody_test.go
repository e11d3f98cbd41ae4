package sqsclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsclient"
)

// closingBody behaves like the SDK's request body: once closed, WriteTo
// reports io.EOF rather than nil.
type closingBody struct {
	mu     sync.Mutex
	r      *strings.Reader
	closed bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *closingBody) WriteTo(w io.Writer) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.EOF
	}
	return b.r.WriteTo(w)
}

func (b *closingBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

type captureClient struct{ got *http.Request }

func (c *captureClient) Do(r *http.Request) (*http.Response, error) {
	c.got = r
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
}

func TestBufferRequestBodiesOutlivesTheSDKsClose(t *testing.T) {
	next := &captureClient{}
	o := sqs.Options{HTTPClient: next}
	sqsclient.BufferRequestBodies(&o)
	sqsclient.BufferRequestBodies(&o) // idempotent: one layer only

	const payload = `{"QueueUrl":"q"}`
	orig := &closingBody{r: strings.NewReader(payload)}
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", orig)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // unknown to the transport: the wrapper must set it
	if _, err := o.HTTPClient.Do(req); err != nil {
		t.Fatal(err)
	}
	if next.got == nil || next.got == req {
		t.Fatalf("the next client got %p, want a copy of %p", next.got, req)
	}
	if !orig.closed {
		t.Error("the SDK's body was not closed once read")
	}
	// What net/http does after the last byte: read again, via WriteTo when
	// the body has it. It must see a clean end, not the SDK's io.EOF error.
	got, err := io.ReadAll(next.got.Body)
	if err != nil || string(got) != payload {
		t.Fatalf("body %q, %v", got, err)
	}
	if n, err := io.Copy(io.Discard, next.got.Body); n != 0 || err != nil {
		t.Fatalf("extra read: %d bytes, %v", n, err)
	}
	if next.got.ContentLength != int64(len(payload)) {
		t.Errorf("ContentLength %d, want %d", next.got.ContentLength, len(payload))
	}
	again, err := next.got.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(again); string(b) != payload {
		t.Errorf("GetBody gave %q", b)
	}
}

func TestBufferRequestBodiesEmptyAndFailingBodies(t *testing.T) {
	next := &captureClient{}
	o := sqs.Options{HTTPClient: next}
	sqsclient.BufferRequestBodies(&o)

	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", strings.NewReader(""))
	if _, err := o.HTTPClient.Do(req); err != nil {
		t.Fatal(err)
	}
	if next.got.Body != http.NoBody || next.got.ContentLength != 0 {
		t.Errorf("empty body sent as %T, length %d", next.got.Body, next.got.ContentLength)
	}

	boom := errors.New("boom")
	next.got = nil
	req, _ = http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", io.NopCloser(iotestErrReader{boom}))
	if _, err := o.HTTPClient.Do(req); !errors.Is(err, boom) {
		t.Errorf("failing body: %v, want it wrapped", err)
	}
	if next.got != nil {
		t.Error("a request whose body could not be read was sent")
	}

	var d sqs.Options
	sqsclient.BufferRequestBodies(&d)
	if d.HTTPClient == nil {
		t.Error("nil HTTPClient left nil")
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// TestBufferRequestBodiesNoFailedWrites drives a server over TCP hard enough
// that, without the wrapper, net/http reports failed request writes (and
// closes connections under responses being read): with it there must be none.
func TestBufferRequestBodiesNoFailedWrites(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		if be.Endpoint == "" {
			t.Skip("needs a local endpoint")
		}
		t.Parallel()
		var failed, wrote atomic.Int64
		var firstErr atomic.Value
		client := sqs.New(sqstestenv.NewClient(be.Endpoint, nil).Options(), sqsclient.BufferRequestBodies, func(o *sqs.Options) {
			o.HTTPClient = traceWrites{next: o.HTTPClient, failed: &failed, wrote: &wrote, first: &firstErr}
		})
		ctx := context.Background()
		q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "body"))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
		var wg sync.WaitGroup
		var callErr atomic.Value
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 150 {
					if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(fmt.Sprintf("m-%d-%d", g, i))}); err != nil {
						callErr.Store(err)
						return
					}
					out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
					if err != nil {
						callErr.Store(err)
						return
					}
					for _, m := range out.Messages {
						if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
							callErr.Store(err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := callErr.Load().(error); err != nil {
			t.Fatal(err)
		}
		if failed.Load() != 0 {
			t.Fatalf("%d of %d request writes failed, first: %v", failed.Load(), failed.Load()+wrote.Load(), firstErr.Load())
		}
		if wrote.Load() < 8*150*2 {
			t.Fatalf("only %d requests traced", wrote.Load())
		}
	})
}

// traceWrites records the outcome of every request write net/http reports.
type traceWrites struct {
	next          sqs.HTTPClient
	failed, wrote *atomic.Int64
	first         *atomic.Value
}

func (c traceWrites) Do(r *http.Request) (*http.Response, error) {
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err != nil {
				c.failed.Add(1)
				c.first.CompareAndSwap(nil, i.Err.Error())
				return
			}
			c.wrote.Add(1)
		},
	}))
	return c.next.Do(r)
}
