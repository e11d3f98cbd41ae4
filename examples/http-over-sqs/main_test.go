package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/sqstest"
)

const want = `POST /todos -> 201 /todos/1 {"id":1,"title":"write the adapter","done":false}
POST /todos -> 201 /todos/2 {"id":2,"title":"ship it","done":false}
GET /todos/2 -> 200 {"id":2,"title":"ship it","done":false}
GET /todos/9 -> 404 404 page not found
GET /countdown: 3
GET /countdown: 2
GET /countdown: 1
GET /countdown: liftoff
5 requests over SQS, `

func TestBothInOneProcess(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, nil, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.HasPrefix(out.String(), want) {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
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
	var serverOut bytes.Buffer
	go func() { served <- run(serveCtx, []string{"-mode", "server", "-endpoint-url", srv.URL()}, &serverOut) }()
	var out bytes.Buffer
	err := run(ctx, []string{"-mode", "client", "-endpoint-url", srv.URL()}, &out)
	stop()
	if serr := <-served; serr != nil {
		t.Errorf("server: %v", serr)
	}
	if err != nil || !strings.HasPrefix(out.String(), want) {
		t.Fatalf("client: %v\n%s", err, out.String())
	}
	if !strings.Contains(serverOut.String(), "serving") {
		t.Fatalf("server output %q", serverOut.String())
	}
}

func TestSeparateProcessesNeedASharedServer(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	if err := run(context.Background(), []string{"-mode", "client"}, new(bytes.Buffer)); err == nil {
		t.Fatal("client mode on an embedded server must fail")
	}
}
