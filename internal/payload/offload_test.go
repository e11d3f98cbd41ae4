package payload

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/memstore"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Fixtures of pointer messages as the extended clients send them
// (docs/wire.md, "Payloads in S3"): the Java client 2.x and the Python
// client write the pointer class and the two fields, with
// ExtendedPayloadSize as a Number; the Java client 1.x wrote the legacy
// class and SQSLargePayloadSize.
var fixtures = []struct {
	name, body, attr string
}{
	{"java2", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"ext-bucket","s3Key":"5d3c6b1e-0f7a-4b8e-9c2d-6a1f0e9b8c7d"}]`, SizeAttribute},
	{"python", `["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "ext-bucket", "s3Key": "5d3c6b1e-0f7a-4b8e-9c2d-6a1f0e9b8c7d"}]`, SizeAttribute},
	{"java1", `["com.amazon.sqs.javamessaging.MessageS3Pointer",{"s3BucketName":"ext-bucket","s3Key":"5d3c6b1e-0f7a-4b8e-9c2d-6a1f0e9b8c7d"}]`, LegacySizeAttribute},
}

// TestFetchExtendedClientPointers: a pointer as each client writes it is
// read through the store, its size attribute dropped, the user's kept.
func TestFetchExtendedClientPointers(t *testing.T) {
	t.Parallel()
	store := memstore.New("ext-bucket")
	body := strings.Repeat("large payload ", 100_000)
	if _, err := store.Put(context.Background(), "5d3c6b1e-0f7a-4b8e-9c2d-6a1f0e9b8c7d", []byte(body)); err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			m := types.Message{Body: aws.String(f.body), MessageAttributes: map[string]types.MessageAttributeValue{
				f.attr:   {DataType: aws.String("Number"), StringValue: aws.String("1400000")},
				"userAt": {DataType: aws.String("String"), StringValue: aws.String("kept")},
			}}
			out, p, ok, err := Fetch(context.Background(), store, m)
			if err != nil || !ok {
				t.Fatalf("Fetch: %v, pointer %v", err, ok)
			}
			if p != (Pointer{Bucket: "ext-bucket", Key: "5d3c6b1e-0f7a-4b8e-9c2d-6a1f0e9b8c7d"}) {
				t.Errorf("pointer %+v", p)
			}
			if aws.ToString(out.Body) != body {
				t.Errorf("body of %d bytes, want %d", len(aws.ToString(out.Body)), len(body))
			}
			if _, ok := out.MessageAttributes[f.attr]; ok || len(out.MessageAttributes) != 1 {
				t.Errorf("attributes %v, want userAt alone", out.MessageAttributes)
			}
			if aws.ToString(m.Body) != f.body {
				t.Error("Fetch changed its argument's body")
			}
		})
	}
}

// TestNotPointers: a body shaped as a pointer without the size
// attribute, or a size attribute beside another body, is a plain message,
// as the extended clients take it.
func TestNotPointers(t *testing.T) {
	t.Parallel()
	size := map[string]types.MessageAttributeValue{SizeAttribute: {DataType: aws.String("Number"), StringValue: aws.String("1")}}
	for _, m := range []types.Message{
		{Body: aws.String(fixtures[0].body)},
		{Body: aws.String(`["other.Class",{"s3BucketName":"b","s3Key":"k"}]`), MessageAttributes: size},
		{Body: aws.String(`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"","s3Key":"k"}]`), MessageAttributes: size},
		{Body: aws.String(`{"s3BucketName":"b","s3Key":"k"}`), MessageAttributes: size},
		{Body: aws.String("plain"), MessageAttributes: size},
	} {
		if out, _, ok, err := Fetch(context.Background(), nil, m); ok || err != nil || out.Body != m.Body {
			t.Errorf("%s: read as a pointer (%v, %v)", aws.ToString(m.Body), ok, err)
		}
	}
}

// TestPointerAsExtendedClientsParseIt: what Offload sends is what the
// clients parse: a two-element JSON array, the class, then an object of
// s3BucketName and s3Key; ExtendedPayloadSize a Number of the body's
// bytes. The receipt handle an extended client would hand its caller
// splits back into the pointer and SQS's handle.
func TestPointerAsExtendedClientsParseIt(t *testing.T) {
	t.Parallel()
	store := memstore.New("tq-bucket")
	attrs := map[string]types.MessageAttributeValue{BodyAttribute: {DataType: aws.String(DataType), BinaryValue: []byte{1}}}
	deadline := time.Unix(1_900_000_000, 0)
	p, err := Offload(context.Background(), store, "héllo", attrs, deadline)
	if err != nil {
		t.Fatal(err)
	}
	var arr []json.RawMessage
	if err := json.Unmarshal([]byte(p.String()), &arr); err != nil || len(arr) != 2 {
		t.Fatalf("pointer %s: not a two-element array (%v)", p, err)
	}
	var class string
	var fields map[string]string
	if json.Unmarshal(arr[0], &class) != nil || class != PointerClass || json.Unmarshal(arr[1], &fields) != nil ||
		len(fields) != 2 || fields["s3BucketName"] != "tq-bucket" || fields["s3Key"] != p.Key {
		t.Fatalf("pointer %s", p)
	}
	if want := KeyPrefix + "1900000000/"; !strings.HasPrefix(p.Key, want) || len(p.Key) != len(want)+36 {
		t.Errorf("key %q, want %s and a UUID", p.Key, want)
	}
	v := attrs[SizeAttribute]
	if aws.ToString(v.DataType) != "Number" || aws.ToString(v.StringValue) != "6" {
		t.Errorf("%s = %s %q, want Number 6 (bytes)", SizeAttribute, aws.ToString(v.DataType), aws.ToString(v.StringValue))
	}
	if _, ok := attrs[BodyAttribute]; ok {
		t.Error("the compressed carrier stays beside the pointer")
	}
	h := p.ReceiptHandle("AQEBsqs+handle==")
	if want := "-..s3BucketName..-tq-bucket-..s3BucketName..--..s3Key..-" + p.Key + "-..s3Key..-AQEBsqs+handle=="; h != want {
		t.Errorf("receipt handle %q, want %q", h, want)
	}
	if q, sqsHandle, ok := SplitReceiptHandle(h); !ok || q != p || sqsHandle != "AQEBsqs+handle==" {
		t.Errorf("SplitReceiptHandle: %+v %q %v", q, sqsHandle, ok)
	}
	if _, same, ok := SplitReceiptHandle("AQEBsqs"); ok || same != "AQEBsqs" {
		t.Error("a plain handle split")
	}
}

// TestOffloadAndFetchErrors: over the maximum fails before any call; no
// store, a store out of reach, a missing object and a body SQS would not
// carry each fail with their own error.
func TestOffloadAndFetchErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New("tq-bucket")
	if _, err := Offload(ctx, store, strings.Repeat("x", MaxPayload+1), map[string]types.MessageAttributeValue{}, time.Time{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the maximum: %v", err)
	}
	if puts, _, _ := store.Calls(); puts != 0 {
		t.Errorf("%d puts for a body over the maximum", puts)
	}
	if _, err := Offload(ctx, nil, "x", map[string]types.MessageAttributeValue{}, time.Time{}); !errors.Is(err, sqsapi.ErrNoPayloadStore) {
		t.Errorf("no store: %v", err)
	}
	store.SetDown(true)
	if _, err := Offload(ctx, store, "x", map[string]types.MessageAttributeValue{}, time.Time{}); err == nil || !strings.Contains(err.Error(), "tq-bucket") {
		t.Errorf("store out of reach: %v", err)
	}
	size := map[string]types.MessageAttributeValue{SizeAttribute: {DataType: aws.String("Number"), StringValue: aws.String("1")}}
	m := types.Message{Body: aws.String(Pointer{Bucket: "tq-bucket", Key: "gone"}.String()), MessageAttributes: size}
	if _, _, _, err := Fetch(ctx, store, m); err == nil || !strings.Contains(err.Error(), "tq-bucket") {
		t.Errorf("get from a store out of reach: %v", err)
	}
	store.SetDown(false)
	if _, _, _, err := Fetch(ctx, nil, m); !errors.Is(err, sqsapi.ErrNoPayloadStore) {
		t.Errorf("no store: %v", err)
	}
	if _, _, _, err := Fetch(ctx, store, m); !errors.Is(err, sqsapi.ErrPayloadNotFound) {
		t.Errorf("missing object: %v", err)
	}
	_, _ = store.Put(ctx, "bad", []byte("\x00"))
	m.Body = aws.String(Pointer{Bucket: "tq-bucket", Key: "bad"}.String())
	if _, _, _, err := Fetch(ctx, store, m); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a body SQS would not carry: %v", err)
	}
}
