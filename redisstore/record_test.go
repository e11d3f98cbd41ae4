package redisstore

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/responder"
)

func roundTrip(t *testing.T, r *responder.Reply) *responder.Reply {
	t.Helper()
	v, err := encodeDone(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeDone(v)
	if err != nil {
		t.Fatalf("decoding %q: %v", v, err)
	}
	return got
}

func TestRecordRoundTrip(t *testing.T) {
	for name, r := range map[string]*responder.Reply{
		"nil":   nil,
		"empty": {},
		"not utf-8": {Body: "ok \xff\xfe\x80 end", Attributes: map[string]types.MessageAttributeValue{
			"s": {DataType: aws.String("String"), StringValue: aws.String("\xc3")},
		}},
		"lists": {Body: "x", Attributes: map[string]types.MessageAttributeValue{
			"sl": {DataType: aws.String("String"), StringListValues: []string{"a", "", "\xff"}},
			"bl": {DataType: aws.String("Binary"), BinaryListValues: [][]byte{{0}, {1, 2}}},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := roundTrip(t, r); !reflect.DeepEqual(got, r) {
				t.Fatalf("round trip of %+v gave %+v", r, got)
			}
		})
	}
	v, _ := encodeDone(&responder.Reply{Body: "a\xffb"})
	if !strings.Contains(v, `"body":{"b64":"Yf9i"}`) {
		t.Fatalf("bytes that are not UTF-8 encoded as %s", v)
	}
}

func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("body", "String", "value", []byte{1, 2})
	f.Add("\xff", "Binary.x", "", []byte{})
	f.Add(`{"b64":"AA=="}`, "Number", "1e9", []byte(nil))
	f.Fuzz(func(t *testing.T, body, dataType, s string, b []byte) {
		r := &responder.Reply{Body: body, Attributes: map[string]types.MessageAttributeValue{
			s: {DataType: aws.String(dataType), StringValue: aws.String(s)},
		}}
		if len(b) > 0 { // an empty binary value reads back as none
			r.Attributes[s+"b"] = types.MessageAttributeValue{DataType: aws.String("Binary"), BinaryValue: b}
		}
		if got := roundTrip(t, r); !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip of %+v gave %+v", r, got)
		}
	})
}
