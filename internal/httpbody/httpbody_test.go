package httpbody_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/httpbody"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestEnsure(t *testing.T) {
	counter := new(callcount.Counter)
	plain := sqs.New(sqs.Options{Region: "us-east-1", APIOptions: nil}, sqs.WithAPIOptions(counter.Register))
	before := plain.Options().HTTPClient

	got := httpbody.Ensure[sqsapi.Client](plain)
	protected, ok := got.(*sqs.Client)
	if !ok || protected == plain {
		t.Fatalf("got %T %p, want a new *sqs.Client", got, got)
	}
	if plain.Options().HTTPClient != before {
		t.Error("the caller's client was modified")
	}
	if len(protected.Options().APIOptions) != len(plain.Options().APIOptions) {
		t.Error("API options (the caller's middleware) were not carried over")
	}
	// Already protected: the same client back.
	if again := httpbody.Ensure[sqsapi.Client](protected); again != sqsapi.Client(protected) {
		t.Error("a protected client was wrapped again")
	}
	// Not an *sqs.Client: untouched.
	var other sqsapi.Client = wrapper{protected}
	if httpbody.Ensure(other) != other {
		t.Error("a client of another type was replaced")
	}
	var none sqsapi.Client
	if httpbody.Ensure(none) != nil {
		t.Error("nil became a client")
	}
}

type wrapper struct{ sqsapi.Client }
