package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/sqstest"
)

const want = `Check orders: SERVING
Watch orders: SERVING
Watch orders: NOT_SERVING
Upload: 4 chunks, 42 bytes
Chat: pong 1
Chat: pong 2
Chat: pong 3
`

func TestBothInOneProcess(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, nil, &out); err != nil || out.String() != want {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
}

// The server and the client as separate runs sharing one SQS endpoint, as
// two processes on tempq emulator share it.
func TestServerAndClientApart(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	srv := sqstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- run(serveCtx, []string{"-mode", "server", "-endpoint-url", srv.URL()}, new(bytes.Buffer))
	}()
	var out bytes.Buffer
	err := run(ctx, []string{"-mode", "client", "-endpoint-url", srv.URL()}, &out)
	stop()
	if serr := <-served; serr != nil {
		t.Errorf("server: %v", serr)
	}
	if err != nil || out.String() != want {
		t.Fatalf("client: %v\n%s", err, out.String())
	}
}
