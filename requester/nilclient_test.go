package requester_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// A typed nil client passes a "client == nil" test; before New checked
// for it, the reaper's lease goroutine dereferenced it moments later and
// the process exited.
func TestNewRejectsNilClients(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]sqsapi.Client{
		"nil":                   nil,
		"typed nil *sqs.Client": (*sqs.Client)(nil),
		"typed nil wrapper":     (*virtualqueue.Client)(nil),
	} {
		r, err := requester.New(c)
		if !isClientError(err) {
			t.Errorf("%s: err = %v, want ErrInvalidInput on client", name, err)
		}
		if r != nil {
			_ = r.Close(context.Background())
		}
	}
}

func isClientError(err error) bool {
	var ie *sqsapi.InvalidInputError
	return errors.Is(err, sqsapi.ErrInvalidInput) && errors.As(err, &ie) && ie.Param == "client"
}
