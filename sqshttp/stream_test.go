package sqshttp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
)

// A body written into a pipe reaches the handler as it is written: the
// handler has the first part before the client writes the last.
func TestPipedBodyReachesTheHandlerAsWritten(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		gotFirst := make(chan struct{})
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			first := make([]byte, len("first;"))
			if _, err := io.ReadFull(r.Body, first); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			close(gotFirst)
			rest, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "len=%d body=%s%s", r.ContentLength, first, rest)
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		pr, pw := io.Pipe()
		go func() {
			_, _ = io.WriteString(pw, "first;")
			select {
			case <-gotFirst: // the handler read it, before the last part exists
			case <-ctx.Done():
			}
			_, _ = io.WriteString(pw, "second;")
			_, _ = io.WriteString(pw, "last")
			_ = pw.Close()
		}()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/upload", pr)
		resp, err := e.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if want := "len=-1 body=first;second;last"; resp.StatusCode != http.StatusOK || string(got) != want {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, got, want)
		}
	})
}

// Bodies too large for one message, of known length or not, binary or
// text, arrive whole; a known length is the handler's ContentLength.
func TestLargeBodiesStreamIntact(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := sha256.New()
			n, err := io.Copy(h, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "%d %d %x", r.ContentLength, n, h.Sum(nil))
		}))
		binary := make([]byte, 3<<20) // 3 MiB: four parts at least
		for i := range binary {
			binary[i] = byte(i*7 + i>>11)
		}
		text := bytes.Repeat([]byte("héllo, wörld; "), 3<<20/16)
		for _, c := range []struct {
			name   string
			body   []byte
			length int64
			unsize bool // hide the length: net/http's "unknown"
		}{
			{"3 MiB binary, unknown length", binary, -1, true},
			{"3 MiB text, known length", text, int64(len(text)), false},
			{"900 KiB binary: fits, but not in base64", binary[:900<<10], 900 << 10, false},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			var body io.Reader = bytes.NewReader(c.body)
			if c.unsize {
				body = io.MultiReader(body)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://x/blob", body)
			resp, err := e.client().Do(req)
			if err != nil {
				cancel()
				t.Fatalf("%s: %v", c.name, err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			if want := fmt.Sprintf("%d %d %x", c.length, len(c.body), sha256.Sum256(c.body)); string(got) != want {
				t.Fatalf("%s: handler saw %q, want %q", c.name, got, want)
			}
		}
	})
}

// A full-duplex handler reads the body and writes the response at once:
// each line echoed comes back before the client writes the next.
func TestFullDuplexEcho(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			if err := rc.EnableFullDuplex(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusOK)
			_ = rc.Flush() // the head goes at once: the client writes only once it has it
			sc := bufio.NewScanner(r.Body)
			for sc.Scan() {
				fmt.Fprintf(w, "%s\n", strings.ToUpper(sc.Text()))
				if err := rc.Flush(); err != nil {
					return
				}
			}
			fmt.Fprintf(w, "bye\n")
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pr, pw := io.Pipe()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/echo", pr)
		resp, err := e.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		lines := bufio.NewReader(resp.Body)
		for i := range 5 {
			msg := fmt.Sprintf("line %d", i)
			if _, err := io.WriteString(pw, msg+"\n"); err != nil {
				t.Fatal(err)
			}
			got, err := lines.ReadString('\n')
			if err != nil || got != strings.ToUpper(msg)+"\n" {
				t.Fatalf("echo of %q: %q, %v", msg, got, err)
			}
		}
		_ = pw.Close()
		rest, err := io.ReadAll(lines)
		if err != nil || string(rest) != "bye\n" {
			t.Fatalf("after the body's end: %q, %v", rest, err)
		}
	})
}

// cancellable serves a handler that flushes "first" unless told to keep
// quiet (the request's "quiet" query), then waits for its context to end
// and reports how it ended.
type cancellable struct {
	started chan struct{}
	ended   chan error
}

func newCancellable() *cancellable {
	return &cancellable{started: make(chan struct{}, 1), ended: make(chan error, 1)}
}

func (c *cancellable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("quiet") == "" {
		fmt.Fprint(w, "first")
		w.(http.Flusher).Flush()
	}
	c.started <- struct{}{}
	<-r.Context().Done()
	c.ended <- context.Cause(r.Context())
}

// waitCancelled checks that the handler's context is cancelled, by its
// caller's going away, within a couple of seconds of since, and that the
// responder counts the request as dropped, not failed.
func (c *cancellable) waitCancelled(t *testing.T, e *env, since time.Time) {
	t.Helper()
	select {
	case cause := <-c.ended:
		if d := time.Since(since); d > 2*time.Second {
			t.Errorf("the handler's context was cancelled %v after the caller went away, want 2 s at most", d)
		} else {
			t.Logf("the handler's context was cancelled %v after the caller went away", d)
		}
		if !errors.Is(cause, responder.ErrCallerGone) {
			t.Errorf("the handler's context ended with %v, want ErrCallerGone", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	testtime.Until(5*time.Second, func() bool { return e.resp.Stats().Dropped > 0 })
	if st := e.resp.Stats(); st.Failed != 0 || st.Dropped != 1 {
		t.Errorf("responder Stats: Failed %d, Dropped %d; want 0 and 1 (a request whose caller went away is dropped)", st.Failed, st.Dropped)
	}
}

func TestClosingTheResponseBodyCancelsTheHandler(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		c := newCancellable()
		e := newEnv(t, b, c)
		resp, err := e.client().Get("http://x/wait")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len("first"))
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			t.Fatal(err)
		}
		<-c.started
		closed := time.Now()
		_ = resp.Body.Close()
		c.waitCancelled(t, e, closed)
	})
}

func TestCancellingTheRequestCancelsTheHandler(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		t.Run("while the response streams", func(t *testing.T) {
			c := newCancellable()
			e := newEnv(t, b, c)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/wait", nil)
			resp, err := e.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			<-c.started
			cancelled := time.Now()
			cancel()
			if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
				t.Errorf("reading the body after the cancel: %v, want context.Canceled", err)
			}
			c.waitCancelled(t, e, cancelled)
		})
		t.Run("before the response", func(t *testing.T) {
			c := newCancellable()
			e := newEnv(t, b, c)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/wait?quiet=1", nil)
			done := make(chan error, 1)
			go func() {
				resp, err := e.client().Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			<-c.started
			cancelled := time.Now()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Do: %v, want context.Canceled", err)
			}
			c.waitCancelled(t, e, cancelled)
		})
	})
}

// A handler that answers without reading the body stops the upload: the
// writer of a piped body gets an error instead of blocking for ever.
func TestAnAnswerStopsTheUpload(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	pr, pw := io.Pipe()
	writeErr := make(chan error, 1)
	go func() {
		chunk := bytes.Repeat([]byte("x"), 4096)
		for {
			if _, err := pw.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://x/upload", pr)
	resp, err := e.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
	select {
	case err := <-writeErr:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("the writer got %v, want io.ErrClosedPipe", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upload went on after the response")
	}
}

// A body whose reader fails stops the handler: it must not take what it
// got for the whole body. The client gets the body's error.
func TestAFailingBodyStopsTheHandler(t *testing.T) {
	synctest.Test(t, testAFailingBodyStopsTheHandler)
}

// testAFailingBodyStopsTheHandler runs in a synctest bubble: the writer's
// pause is the bubble's.
func testAFailingBodyStopsTheHandler(t *testing.T) {
	readErr := make(chan error, 1)
	e := newEnv(t, sqstestenv.InProcess(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	}))
	pr, pw := io.Pipe()
	boom := errors.New("disk on fire")
	go func() {
		_, _ = io.WriteString(pw, "some of it")
		testtime.Pause(300 * time.Millisecond) // the handler reads the first part
		pw.CloseWithError(boom)
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://x/upload", pr)
	if _, err := e.client().Do(req); !errors.Is(err, boom) {
		t.Errorf("Do: %v, want the body's error", err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, responder.ErrCallerGone) {
			t.Errorf("the handler's read ended with %v, want an error matching ErrCallerGone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's read did not end")
	}
}

// A plain request costs what it cost before sessions: one send each way,
// and no session queue, since its handler neither streams nor runs long.
func TestAPlainRequestOpensNoSession(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) }))
		hc := e.client()
		send := func() {
			resp, err := hc.Post("http://x/echo", "text/plain", strings.NewReader("ping"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "ping" {
				t.Fatalf("body %q", body)
			}
		}
		send() // the requester's host queue is created
		sends := func() int64 { return e.counter.Get("SendMessage") + e.counter.Get("SendMessageBatch") }
		before := sends()
		const n = 10
		for range n {
			send()
		}
		if got := sends() - before; got != 2*n {
			t.Errorf("%d sends for %d requests, want %d: a request and its reply each", got, n, 2*n)
		}
		out, err := e.raw.ListQueues(context.Background(), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(e.prefix + "s_")})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.QueueUrls) != 0 {
			t.Errorf("session queues %v, want none", out.QueueUrls)
		}
	})
}

// A handler that panics once its session is open (it flushed) aborts the
// session: the caller fails at once, rather than waiting for a redelivery
// that could not read the body again. The abort stops the stream where it
// is: it may overtake the first part.
func TestAPanicAfterAFlushAbortsTheSession(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "first")
		w.(http.Flusher).Flush()
		panic("out of luck")
	}))
	resp, err := e.client().Get("http://x/")
	if err == nil {
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
	}
	if !errors.Is(err, requester.ErrSessionAborted) || !strings.Contains(err.Error(), "out of luck") {
		t.Fatalf("got %v, want ErrSessionAborted saying why", err)
	}
	testtime.Until(5*time.Second, func() bool { return e.resp.Stats().Dropped > 0 })
	if st := e.resp.Stats(); st.Failed != 1 || st.Dropped != 1 {
		t.Errorf("responder Stats: Failed %d, Dropped %d; want 1 and 1 (aborted)", st.Failed, st.Dropped)
	}
}
