package virtualqueue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// Before New returned an error, a typed nil client made a Client whose
// host pollers panicked on their own goroutines.
func TestNewRejectsNilClients(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]sqsapi.Client{
		"nil":                   nil,
		"typed nil *sqs.Client": (*sqs.Client)(nil),
		"typed nil wrapper":     (*virtualqueue.Client)(nil),
	} {
		vc, err := virtualqueue.New(c)
		var ie *sqsapi.InvalidInputError
		if !errors.Is(err, sqsapi.ErrInvalidInput) || !errors.As(err, &ie) || ie.Param != "client" {
			t.Errorf("%s: err = %v, want ErrInvalidInput on client", name, err)
		}
		if vc != nil {
			_ = vc.Close(context.Background())
		}
	}
}
