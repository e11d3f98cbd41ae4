package oteltempq_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqshttp"
)

// An http.Handler behind sqshttp runs in the trace of the http.Client's
// request: the adapter's messages are a requester's and a responder's, so
// the instrumentation carries the context without the adapter's help.
func TestHTTPOverSQSIsOneTrace(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		inst, _, _ := setup(t, true)
		client, _ := b.Client(t)
		client = sqs.New(client.Options(), inst.SQS)
		q := createQueue(t, client, "otelhttp")
		resp, err := responder.New(client, inst.Responder, func(o *responder.Options) { o.PollWaitTime = time.Second })
		if err != nil {
			t.Fatal(err)
		}
		handlerTrace := make(chan trace.TraceID, 1)
		served := make(chan error, 1)
		go func() {
			served <- resp.Serve(context.Background(), q, sqshttp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				handlerTrace <- trace.SpanContextFromContext(r.Context()).TraceID()
				_, _ = io.WriteString(w, "ok")
			})))
		}()
		rq, err := requester.New(client, inst.Requester, func(o *requester.Options) { o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ctx, span := sdktrace.NewTracerProvider().Tracer("test").Start(ctx, "caller")
		defer span.End()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/x", nil)
		res, err := (&http.Client{Transport: sqshttp.NewTransport(rq, q)}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if got := <-handlerTrace; got != span.SpanContext().TraceID() {
			t.Errorf("handler's trace %v, caller's %v", got, span.SpanContext().TraceID())
		}
		_ = rq.Close(ctx)
		if err := resp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
	})
}
