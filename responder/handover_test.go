package responder

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestHandover measures what a rolling restart costs: requests arrive at
// 50/s while responder B starts and responder A shuts down, several times.
// It fails if a request is lost or a Shutdown reports abandoned work, and
// logs how many requests were delayed by a visibility timeout (a receive
// cancelled at A's stop that the server kept parked and gave a request to)
// — the figure quoted in the package documentation.
//
// It runs in real time, on fauxqs and on sqstest over TCP: the delay it
// measures comes from a server that keeps a long poll parked after its
// client cancelled it, which needs a real connection (an in-process
// client's cancel reaches the server at once); its sleeps pace the
// handovers against that real server.
func TestHandover(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for about 10 s per backend")
	}
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		const (
			rate       = 50 // requests per second
			handovers  = 5
			between    = time.Second
			visibility = 4 * time.Second
		)
		e := newEnv(t, be)
		q := e.queue("handover", nil)

		var mu sync.Mutex
		sent := map[string]time.Time{}
		first := map[string]time.Time{}
		handled := 0
		h := HandlerFunc(func(_ context.Context, req *Request) (*Reply, error) {
			mu.Lock()
			defer mu.Unlock()
			handled++
			if _, ok := first[req.ID]; !ok {
				first[req.ID] = time.Now()
			}
			return nil, nil
		})
		start := func() (*Responder, chan error) {
			r, err := New(e.client, func(o *Options) { o.VisibilityTimeout = visibility })
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { errc <- r.Serve(context.Background(), q, h) }()
			return r, errc
		}

		stopSend := make(chan struct{})
		sendDone := make(chan struct{})
		go func() {
			defer close(sendDone)
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stopSend:
					return
				case <-tick.C:
				}
				id := fmt.Sprintf("h-%d", i)
				mu.Lock()
				sent[id] = time.Now()
				mu.Unlock()
				if _, err := e.client.SendMessage(context.Background(), &sqs.SendMessageInput{
					QueueUrl: &q, MessageBody: &id,
					MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.RequestIDAttribute: wire.StringAttribute(id)},
				}); err != nil {
					t.Errorf("SendMessage: %v", err)
					return
				}
			}
		}()

		cur, curErr := start()
		for range handovers {
			time.Sleep(between) // real: see the test's comment
			next, nextErr := start()
			testtime.Eventually(t, 5*time.Second, "B's first poll", func() bool { return next.Stats().Pollers > 0 })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := cur.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			cancel()
			if err := <-curErr; err != nil {
				t.Errorf("Serve: %v", err)
			}
			cur, curErr = next, nextErr
		}
		time.Sleep(between) // real: see the test's comment
		close(stopSend)
		<-sendDone

		// Whatever a parked receive took reappears after its visibility.
		testtime.Until(visibility+5*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(first) == len(sent)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cur.Shutdown(ctx); err != nil {
			t.Errorf("last Shutdown: %v", err)
		}
		if err := <-curErr; err != nil {
			t.Errorf("last Serve: %v", err)
		}

		mu.Lock()
		defer mu.Unlock()
		lost, delayed := 0, 0
		var worst time.Duration
		for id, at := range sent {
			got, ok := first[id]
			if !ok {
				lost++
				continue
			}
			d := got.Sub(at)
			worst = max(worst, d)
			if d > visibility/2 {
				delayed++
			}
		}
		t.Logf("%s: %d requests at %d/s over %d handovers: %d lost, %d delayed by a visibility timeout (%.2f%%), %d handled twice, slowest %v",
			be.Name, len(sent), rate, handovers, lost, delayed, 100*float64(delayed)/float64(len(sent)), handled-len(first), worst.Round(time.Millisecond))
		if lost > 0 {
			t.Errorf("%d requests lost", lost)
		}
		if len(sent) < rate*handovers {
			t.Errorf("only %d requests sent", len(sent))
		}
	})
}
