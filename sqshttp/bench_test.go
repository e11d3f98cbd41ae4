package sqshttp_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/rpcbench"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqshttp"
)

// BenchmarkOverhead measures what the adapter adds to a plain
// SendMessageAndGetResponse round trip: the same small echo, at 1, 8 and
// 64 concurrent callers, directly, through sqshttp (a session, the
// default), through sqshttp with DisableStreaming, and two sessions that
// open: a handler that flushes before it echoes (a streamed response),
// and a body of unknown length (streamed to the handler). It reports the
// process's CPU time per RPC (client, responder and the in-process sqstest
// server together, so the adapter's share is diluted by the server's
// work, as it would be by the network stack's) and API calls per RPC.
func BenchmarkOverhead(b *testing.B) {
	be := sqstestenv.SQSTest(b)
	for _, callers := range []int{1, 8, 64} {
		for _, mode := range []string{"direct", "sqshttp", "sqshttp-onereply", "sqshttp-flush", "sqshttp-upload"} {
			b.Run(mode+"/callers="+strconv.Itoa(callers), func(b *testing.B) { benchOverhead(b, be, mode, callers) })
		}
	}
}

func benchOverhead(b *testing.B, be *sqstestenv.Backend, mode string, callers int) {
	client, counter := be.Client(b)
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(b, "bench"))})
	if err != nil {
		b.Fatal(err)
	}
	defer client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
	resp, err := responder.New(client, func(o *responder.Options) { o.MaxConcurrency = 64; o.PollWaitTime = time.Second })
	if err != nil {
		b.Fatal(err)
	}
	var h responder.Handler = responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
		return &responder.Reply{Body: req.Body()}, nil
	})
	if mode != "direct" {
		h = sqshttp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			if r.URL.Path == "/flush" {
				w.(http.Flusher).Flush()
			}
			_, _ = io.Copy(w, r.Body)
		}))
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- resp.Serve(serveCtx, *q.QueueUrl, h) }()
	defer func() { stop(); <-served }()
	r, err := requester.New(client, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	hc := &http.Client{Transport: sqshttp.NewTransport(r, *q.QueueUrl, func(o *sqshttp.TransportOptions) {
		o.DisableStreaming = mode == "sqshttp-onereply"
	})}
	call := func() error {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if mode == "direct" {
			_, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("ping")})
			return err
		}
		var body io.Reader = strings.NewReader("ping")
		if mode == "sqshttp-upload" {
			body = io.MultiReader(body) // its length unknown
		}
		path := "/echo"
		if mode == "sqshttp-flush" {
			path = "/flush"
		}
		req, _ := http.NewRequestWithContext(cctx, http.MethodPost, "http://bench"+path, body)
		res, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return err
	}
	rpcbench.Run(b, callers, counter, call)
}
