package sqstest_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqstest"
)

func TestNewHandlerDataDir(t *testing.T) {
	// A DataDir that is a file cannot hold a journal: an error, not a panic.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := sqstest.NewHandler(func(o *sqstest.Options) { o.DataDir = file }); err == nil {
		_ = s.Close(context.Background())
		t.Fatal("NewHandler took a file as its DataDir")
	}

	s, err := sqstest.NewHandler(func(o *sqstest.Options) { o.DataDir = t.TempDir() })
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	client := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL), Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := aws.ToString(out.QueueUrl), hs.URL+"/000000000000/jobs"; got != want {
		t.Fatalf("queue URL %q, want %q (the request's host)", got, want)
	}
}
