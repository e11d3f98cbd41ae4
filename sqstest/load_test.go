package sqstest_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// load parks pollers long polls on one queue, sends messages from a few
// goroutines, and checks that every message is delivered exactly once.
func (x *target) load(pollers, messages int) {
	x.t.Helper()
	url := x.createQueue("load", nil)
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()

	var (
		mu       sync.Mutex
		seen     = make(map[string]int)
		received = make(chan struct{}, messages*2)
		wg       sync.WaitGroup
	)
	for i := 0; i < pollers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				out, err := x.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20, MaxNumberOfMessages: 10})
				if err != nil {
					if ctx.Err() == nil {
						x.t.Errorf("ReceiveMessage: %v", err)
					}
					return
				}
				for _, m := range out.Messages {
					mu.Lock()
					seen[*m.Body]++
					mu.Unlock()
					// A fresh context: the delete must land even if the
					// test is finishing.
					if _, err := x.c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
						x.t.Errorf("DeleteMessage: %v", err)
					}
					received <- struct{}{}
				}
			}
		}()
	}
	x.waitParked(pollers)

	const senders = 5
	var swg sync.WaitGroup
	for s := 0; s < senders; s++ {
		swg.Add(1)
		go func() {
			defer swg.Done()
			for i := s; i < messages; i += senders {
				if _, err := x.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(fmt.Sprint("m", i))}); err != nil {
					x.t.Errorf("SendMessage: %v", err)
					return
				}
			}
		}()
	}
	swg.Wait()
	timeout := time.After(30 * time.Second)
	for n := 0; n < messages; n++ {
		select {
		case <-received:
		case <-timeout:
			x.t.Fatalf("only %d of %d messages delivered", n, messages)
		}
	}
	// A duplicate would be in a receive that returned by now: once every
	// poller is parked again, all that was received has been counted.
	x.waitParked(pollers)
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != messages {
		x.t.Fatalf("%d distinct messages delivered, want %d", len(seen), messages)
	}
	for body, n := range seen {
		if n != 1 {
			x.t.Fatalf("%s delivered %d times", body, n)
		}
	}
}
