package oteltempq

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// A destination's name goes into span names and metric attributes, so it
// must not vary per request or per process: every temporary queue is
// "(temporary)".
func TestDestinationNames(t *testing.T) {
	const base = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	for _, tc := range []struct {
		url       string
		reply     bool
		name      string
		temporary bool
	}{
		{base + "orders", false, "orders", false},
		{base + "orders.fifo", false, "orders.fifo", false},
		{"http://127.0.0.1:4566/000000000000/login", false, "login", false},
		{base + "__RequesterClientQueues__8bd2e05a-0b7e-4a36-9d0f-3f1b2c4d5e6f-0#5dffcce4-1a2b-4c3d-8e9f-0a1b2c3d4e5f", true, temporaryName, true},
		{base + "__RequesterClientQueues__8bd2e05a-0b7e-4a36-9d0f-3f1b2c4d5e6f-0#5dffcce4-1a2b-4c3d-8e9f-0a1b2c3d4e5f", false, temporaryName, true},
		{base + "__RequesterClientQueues__8bd2e05a-0b7e-4a36-9d0f-3f1b2c4d5e6f-0", false, temporaryName, true},
		{base + "myhosts-1#jobs", false, temporaryName, true},
		{base + "replies", true, temporaryName, true}, // a Java requester's static reply queue
		{"", true, temporaryName, true},
	} {
		d := destinationOf(tc.url, tc.reply)
		if d.name != tc.name || d.temporary != tc.temporary || d.url != tc.url {
			t.Errorf("destinationOf(%q, %v) = %+v, want name %q temporary %v", tc.url, tc.reply, d, tc.name, tc.temporary)
		}
		attrs := map[string]string{}
		for _, kv := range d.attributes("send", "send") {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if attrs["messaging.destination.name"] != tc.name || (attrs["messaging.destination.temporary"] == "true") != tc.temporary {
			t.Errorf("%q: attributes %v", tc.url, attrs)
		}
		if strings.Contains(d.name, "#") {
			t.Errorf("%q: name %q has a virtual queue's name", tc.url, d.name)
		}
	}
}

// messageSize is this module's copy of the core's size rule: they must
// agree.
func TestMessageSizeMatchesCore(t *testing.T) {
	for _, tc := range []struct {
		body  *string
		attrs map[string]types.MessageAttributeValue
	}{
		{nil, nil},
		{aws.String("hello"), nil},
		{aws.String(strings.Repeat("x", 1000)), map[string]types.MessageAttributeValue{
			"a":  {DataType: aws.String("String"), StringValue: aws.String("value")},
			"b":  {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2, 3}},
			"nd": {StringValue: aws.String("no type")},
		}},
	} {
		if got, want := messageSize(tc.body, tc.attrs), wire.MessageSize(tc.body, tc.attrs); got != want {
			t.Errorf("messageSize = %d, the core's rule %d", got, want)
		}
	}
}
