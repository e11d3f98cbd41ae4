package sqshttp_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqshttp"
	"github.com/tempqueues/tempqueues/sqstest"
)

// An http.ServeMux served from a request queue, and an http.Client that
// calls it: two lines of wiring, the handler and the client unchanged.
func Example() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("greeter")})
	if err != nil {
		log.Fatal(err)
	}

	// The service: an ordinary mux.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.PathValue("name"))
	})
	resp, err := responder.New(client, func(o *responder.Options) { o.PollWaitTime = time.Second })
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- resp.Serve(ctx, *q.QueueUrl, sqshttp.Handler(mux)) }()
	defer func() { _ = resp.Shutdown(ctx); <-served }()

	// The caller: an ordinary http.Client.
	r, err := requester.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)
	hc := &http.Client{Transport: sqshttp.NewTransport(r, *q.QueueUrl), Timeout: 10 * time.Second}
	res, err := hc.Get("http://greeter/hello/sqs")
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, string(body))
	// Output:
	// 200 hello, sqs
}
