package wire

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestCheckFIFOID(t *testing.T) {
	for _, ok := range []string{"a", "g-1_x.y", `!"#$%&'()*+,-./:;<=>?@[\]^_{|}~` + "`", strings.Repeat("x", 128)} {
		if err := CheckFIFOID("op", "MessageGroupId", aws.String(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "tab\t", "é", strings.Repeat("x", 129)} {
		if err := CheckFIFOID("op", "MessageGroupId", aws.String(bad)); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%q: %v, want ErrInvalidInput", bad, err)
		}
	}
	if err := CheckFIFOID("op", "MessageGroupId", nil); err != nil {
		t.Errorf("nil: %v", err)
	}
}

func TestCheckFIFOSend(t *testing.T) {
	const fifo, std = "https://sqs.eu-west-1.amazonaws.com/1/q.fifo", "https://sqs.eu-west-1.amazonaws.com/1/q"
	g, d := aws.String("g"), aws.String("d")
	for name, err := range map[string]error{
		"no group":          CheckFIFOSend("op", fifo, nil, d, 0),
		"delay":             CheckFIFOSend("op", fifo, g, d, 5),
		"bad group":         CheckFIFOSend("op", fifo, aws.String("a b"), nil, 0),
		"dedup on standard": CheckFIFOSend("op", std, nil, d, 0),
		"virtual no group":  CheckFIFOSend("op", fifo+"#v", nil, nil, 0),
	} {
		if !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
	for name, err := range map[string]error{
		"fifo":           CheckFIFOSend("op", fifo, g, nil, 0),
		"standard":       CheckFIFOSend("op", std, nil, nil, 10),
		"standard group": CheckFIFOSend("op", std, g, nil, 0),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestVirtualFIFOIDs(t *testing.T) {
	body := aws.String("b")
	g, d, err := VirtualFIFOIDs("op", "vq", aws.String("callers"), nil, 0, body, false)
	if err != nil || *g != "vq" || len(*d) != 36 {
		t.Fatalf("group %v dedup %v err %v: want the queue's name and a UUID", aws.ToString(g), aws.ToString(d), err)
	}
	_, d2, _ := VirtualFIFOIDs("op", "vq", nil, nil, 0, body, false)
	if *d2 == *d {
		t.Fatal("two sends without an id got the same UUID")
	}
	_, c1, _ := VirtualFIFOIDs("op", "vq", nil, nil, 0, body, true)
	_, c2, _ := VirtualFIFOIDs("op", "vq", nil, nil, 0, body, true)
	_, c3, _ := VirtualFIFOIDs("op", "other", nil, nil, 0, body, true)
	if *c1 != *c2 || *c1 == *c3 || CheckFIFOID("op", "id", c1) != nil {
		t.Fatalf("content ids %s %s %s: want equal within a queue, distinct across", *c1, *c2, *c3)
	}
	long := aws.String(strings.Repeat("i", 128))
	_, i1, _ := VirtualFIFOIDs("op", strings.Repeat("n", 80), nil, long, 0, body, false)
	_, i2, _ := VirtualFIFOIDs("op", "vq", nil, long, 0, body, true)
	if *i1 == *i2 || CheckFIFOID("op", "id", i1) != nil {
		t.Fatalf("scoped ids %s %s", *i1, *i2)
	}
	if _, _, err := VirtualFIFOIDs("op", "vq", nil, nil, 3, body, false); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Fatalf("delay: %v", err)
	}
}

func TestVirtualQueueURLFIFONames(t *testing.T) {
	if _, name, err := ParseVirtualQueueURL("https://sqs.eu-west-1.amazonaws.com/1/h.fifo#jobs.fifo"); err != nil || name != "jobs.fifo" {
		t.Fatalf("%q %v", name, err)
	}
	if _, _, err := ParseVirtualQueueURL("https://sqs.eu-west-1.amazonaws.com/1/h#jobs.fifo"); err == nil {
		t.Fatal(".fifo name on a standard host accepted")
	}
}
