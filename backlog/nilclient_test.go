package backlog_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/backlog"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

func TestNewMonitorRejectsNilClients(t *testing.T) {
	for name, c := range map[string]backlog.AttributesGetter{
		"nil":                   nil,
		"typed nil *sqs.Client": (*sqs.Client)(nil),
		"typed nil wrapper":     (*virtualqueue.Client)(nil),
	} {
		if _, err := backlog.NewMonitor(c, "https://sqs.us-east-1.amazonaws.com/123456789012/q"); !isClientError(err) {
			t.Errorf("%s: err = %v, want ErrInvalidInput on client", name, err)
		}
	}
}

func isClientError(err error) bool {
	var ie *sqsapi.InvalidInputError
	return errors.Is(err, sqsapi.ErrInvalidInput) && errors.As(err, &ie) && ie.Param == "client"
}
