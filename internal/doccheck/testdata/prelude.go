// The prelude of every fragment the docs check compiles
// (doccheck_test.go): the names the docs' fragments use without declaring
// them. A fragment may declare any of them again, with :=, to shadow it.
// Add a name here when a new fragment needs one, with the type a reader
// would expect.

package snippet

import (
	"context"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"google.golang.org/grpc"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
)

var (
	ctx       context.Context
	cfg       aws.Config  // as config.LoadDefaultConfig returns it
	client    *sqs.Client // built with sqsclient.BufferRequestBodies
	sqsClient *sqs.Client

	r    *requester.Requester
	resp *responder.Responder

	queueURL        string  // a request queue
	q               *string // a request queue, as SendMessageInput.QueueUrl
	requestQueueURL string
	dlqURL          string // a dead-letter queue
	parkingURL      string // redrive's parking queue

	items, ops []string // what a handler streams, what a caller sends
	store      responder.Store
	timeout    time.Duration

	mux      *http.ServeMux
	getOrder func(http.ResponseWriter, *http.Request)
	logCalls grpc.UnaryServerInterceptor

	login                func(context.Context, *responder.Request) (*responder.Reply, error)
	logging, auth, authz func(responder.Handler) responder.Handler
	runWorker            func(context.Context, *sqs.Client, string)
	apply                func(m any) string // what a session's handler does with a message
)
