package redisstore_test

import (
	"context"
	"log"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/tempqueues/tempqueues/redisstore"
	"github.com/tempqueues/tempqueues/responder"
)

// A responder whose fleet shares one Redis: a request delivered twice, to
// this process or another, runs its handler once, and a redelivery after
// the answer gets the stored reply.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	store, err := redisstore.New(rdb, func(so *redisstore.Options) {
		so.Prefix = "login:idem:" // one prefix per service
		so.Logger = slog.Default()
	})
	if err != nil {
		log.Fatal(err)
	}
	r, err := responder.New(sqs.NewFromConfig(cfg), func(o *responder.Options) {
		o.Store = store
	})
	if err != nil {
		log.Fatal(err)
	}
	err = r.Serve(ctx, "https://sqs.us-east-1.amazonaws.com/123456789012/login",
		responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: "welcome " + *req.Message.Body}, nil
		}))
	if err != nil {
		log.Fatal(err)
	}
}
