package responder_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// A typed nil client passes a "client == nil" test; before New checked
// for it, Serve panicked in its poll loop.
func TestNewRejectsNilClients(t *testing.T) {
	for name, c := range map[string]sqsapi.MessageClient{
		"nil":                   nil,
		"typed nil *sqs.Client": (*sqs.Client)(nil),
		"typed nil wrapper":     (*virtualqueue.Client)(nil),
	} {
		if _, err := responder.New(c); !isClientError(err) {
			t.Errorf("%s: err = %v, want ErrInvalidInput on client", name, err)
		}
	}
}

func isClientError(err error) bool {
	var ie *sqsapi.InvalidInputError
	return errors.Is(err, sqsapi.ErrInvalidInput) && errors.As(err, &ie) && ie.Param == "client"
}
