package awserr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

func TestClassify(t *testing.T) {
	api := func(code string, fault smithy.ErrorFault) error {
		return fmt.Errorf("op: %w", &smithy.GenericAPIError{Code: code, Message: "m", Fault: fault})
	}
	cases := []struct {
		name                   string
		err                    error
		gone, throttle, transi bool
	}{
		{"nil", nil, false, false, false},
		{"typed missing queue", fmt.Errorf("x: %w", NewQueueDoesNotExist("no")), true, false, false},
		{"query-mode missing queue", api("AWS.SimpleQueueService.NonExistentQueue", smithy.FaultClient), true, false, false},
		{"throttled", api("ThrottlingException", smithy.FaultClient), false, true, true},
		{"throttled, SQS's shape", api("RequestThrottled", smithy.FaultClient), false, true, true},
		{"throttled, query-mode code", api("AWS.SimpleQueueService.RequestThrottled", smithy.FaultClient), false, true, true},
		{"throttled, typed with a query code", &types.RequestThrottled{ErrorCodeOverride: aws.String("AWS.SimpleQueueService.RequestThrottled")}, false, true, true},
		{"throttled batch entry", &BatchEntryError{Code: "RequestThrottled", SenderFault: true}, false, true, true},
		{"server fault", api("InternalError", smithy.FaultServer), false, false, true},
		{"client fault", api("InvalidParameterValue", smithy.FaultClient), false, false, false},
		{"failed batch entry, server", &BatchEntryError{Code: "InternalError"}, false, false, true},
		{"failed batch entry, sender", &BatchEntryError{Code: "ReceiptHandleIsInvalid", SenderFault: true}, false, false, false},
		{"cancelled", context.Canceled, false, false, false},
	}
	for _, c := range cases {
		if got := IsQueueDoesNotExist(c.err); got != c.gone {
			t.Errorf("%s: IsQueueDoesNotExist = %v", c.name, got)
		}
		if got := IsThrottle(c.err); got != c.throttle {
			t.Errorf("%s: IsThrottle = %v", c.name, got)
		}
		if got := IsTransient(c.err); got != c.transi {
			t.Errorf("%s: IsTransient = %v", c.name, got)
		}
	}
	var qdne *types.QueueDoesNotExist
	if !errors.As(NewQueueDoesNotExist("gone"), &qdne) {
		t.Error("NewQueueDoesNotExist does not match *types.QueueDoesNotExist")
	}
	var apiErr smithy.APIError
	if err := error(&BatchEntryError{Code: "C", Message: "M", SenderFault: true}); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "C" || apiErr.ErrorFault() != smithy.FaultClient {
		t.Errorf("BatchEntryError as smithy.APIError: %v", apiErr)
	}
}
