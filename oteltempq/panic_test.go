package oteltempq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/responder"
)

func panicInHandler() { panic("boom") }

// A panicking handler ends its span with an error and counts as a panic;
// the responder still gets the panic with the stack of its origin.
func TestMiddlewarePanic(t *testing.T) {
	inst, exp, reader := setup(t, false)
	client, _ := sqstestenv.SQSTest(t).Client(t)
	r, err := responder.New(client, inst.Responder)
	if err != nil {
		t.Fatal(err)
	}
	m := types.Message{MessageId: aws.String("m1"), Body: aws.String("x")} // no reply wanted: no call
	err = r.Process(context.Background(), "https://sqs.eu-west-1.amazonaws.com/1/q", m, responder.HandlerFunc(
		func(context.Context, *responder.Request) (*responder.Reply, error) {
			panicInHandler()
			return nil, nil
		}))
	var pe *responder.PanicError
	if !errors.As(err, &pe) || !strings.Contains(string(pe.Stack), "panicInHandler") {
		t.Fatalf("Process = %v; want a *PanicError whose stack names the handler", err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code != codes.Error {
		t.Errorf("spans %+v, want one with an error status", spans)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if sum, ok := mt.Data.(metricdata.Sum[int64]); ok && mt.Name == "tempqueues.rpc.server.requests" {
				for _, p := range sum.DataPoints {
					if v, _ := p.Attributes.Value("outcome"); v.AsString() == "panic" && p.Value == 1 {
						found = true
					}
				}
			}
		}
	}
	if !found {
		t.Error("no server request counted with outcome panic")
	}
}
