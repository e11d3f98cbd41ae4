package redrive_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestNewRejectsNilClients(t *testing.T) {
	t.Parallel()
	const dlq = "https://sqs.us-east-1.amazonaws.com/123456789012/q-dlq"
	for name, c := range map[string]redrive.Client{
		"nil":                   nil,
		"typed nil *sqs.Client": (*sqs.Client)(nil),
	} {
		if _, err := redrive.New(c, dlq, func(o *redrive.Options) { o.ParkingQueue = dlq + "-parking" }); !isClientError(err) {
			t.Errorf("%s: err = %v, want ErrInvalidInput on client", name, err)
		}
	}
}

func isClientError(err error) bool {
	var ie *sqsapi.InvalidInputError
	return errors.Is(err, sqsapi.ErrInvalidInput) && errors.As(err, &ie) && ie.Param == "client"
}
