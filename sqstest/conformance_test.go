package sqstest_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
)

// check is one conformance check: public SQS behaviour, through the SDK
// only, that must hold on sqstest and on fauxqs alike.
type check struct {
	name string
	// fauxqsDeviation, when set, names where fauxqs departs from what
	// the SQS API Reference documents (one of the dev constants below);
	// the check is skipped there. A check whose first part fauxqs gets
	// right calls x.deviation before the rest instead.
	fauxqsDeviation string
	fn              func(x *target)
}

// Known fauxqs 2.4.1 deviations from AWS.
const (
	devEmoji      = "fauxqs rejects characters outside the BMP (#x10000-#x10FFFF) with InvalidMessageContents"
	devBogusBatch = "fauxqs reports DeleteMessageBatch entries with malformed receipt handles as Successful"
	devBogusOne   = "fauxqs accepts DeleteMessage with a malformed receipt handle"
	devBogusCMV   = "fauxqs answers ChangeMessageVisibility with a malformed handle with MessageNotInflight"
	devDLQSources = "fauxqs does not implement ListDeadLetterSourceQueues (InvalidAction)"

	// Found by this suite.
	devNameRules     = "fauxqs accepts queue names with invalid characters or over 80 characters"
	devDelayRange    = "fauxqs accepts DelaySeconds above 900"
	devAttrRules     = "fauxqs does not validate message attribute names, data types, Number values or the limit of 10"
	devAttrFilter    = "fauxqs returns every message attribute when MessageAttributeNames is absent"
	devFifoAttrs     = "fauxqs accepts ContentBasedDeduplication on a standard queue and knows no DeduplicationScope"
	devFifoScope     = "fauxqs does not implement DeduplicationScope (InvalidAttributeName)"
	devFifoIDs       = "fauxqs accepts a MessageDeduplicationId on a standard queue, group ids with spaces and ids over 128 characters"
	devFifoGroups    = "fauxqs returns a FIFO queue's groups interleaved in send order, not one group's messages together"
	devBareQueueName = "fauxqs accepts a bare queue name as QueueUrl"
	devStaleCMV      = "fauxqs answers ChangeMessageVisibility with an earlier receive's handle with MessageNotInflight, not SQS's InvalidParameterValue"
	devMoveTasks     = "fauxqs does not implement message move tasks (InvalidAction)"
)

// TestConformance runs every check on sqstest, on sqstest over the query
// protocol (queryTransport), and on fauxqs (or the external endpoint named
// by TEMPQUEUES_TEST_ENDPOINT / TEMPQUEUES_TEST_AWS).
func TestConformance(t *testing.T) {
	kinds := []string{"sqstest", "sqstest-query", "fauxqs"}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			for _, c := range checks {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					x := newTarget(t, kind)
					if c.fauxqsDeviation != "" {
						x.deviation(c.fauxqsDeviation)
					}
					c.fn(x)
				})
			}
		})
	}
}

// deviation skips the rest of a check on fauxqs, which departs from AWS
// there as dev says; the part before the call has run on it.
func (x *target) deviation(dev string) {
	if !x.emulated() && x.name == "fauxqs" {
		x.t.Skip("known fauxqs deviation: " + dev)
	}
}

// deviationIf is deviation when fauxqs has answered as dev says: the rest
// of the check must then hold everywhere else.
func (x *target) deviationIf(happened bool, dev string) {
	if happened {
		x.deviation(dev)
	}
}

func TestConformanceCount(t *testing.T) {
	if len(checks) < 45 {
		t.Fatalf("%d conformance checks, want at least 45", len(checks))
	}
}

var checks = []check{
	// Queues.
	{name: "CreateQueueAndGetQueueUrl", fn: func(x *target) {
		url := x.createQueue("q", nil)
		name := url[strings.LastIndexByte(url, '/')+1:]
		out, err := x.c.GetQueueUrl(x.ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		if err != nil {
			x.t.Fatal(err)
		}
		if *out.QueueUrl != url {
			x.t.Fatalf("GetQueueUrl = %s, want %s", *out.QueueUrl, url)
		}
	}},
	{name: "CreateQueueAttributesAndTags", fn: func(x *target) {
		name := "tq-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		out, err := x.c.CreateQueue(x.ctx, &sqs.CreateQueueInput{QueueName: &name,
			Attributes: map[string]string{"VisibilityTimeout": "45", "MessageRetentionPeriod": "3600", "DelaySeconds": "1", "ReceiveMessageWaitTimeSeconds": "2"},
			Tags:       map[string]string{"team": "a", "env": "test"}})
		if err != nil {
			x.t.Fatal(err)
		}
		defer x.c.DeleteQueue(x.ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
		a := x.attributes(*out.QueueUrl, types.QueueAttributeNameAll)
		for k, v := range map[string]string{"VisibilityTimeout": "45", "MessageRetentionPeriod": "3600", "DelaySeconds": "1", "ReceiveMessageWaitTimeSeconds": "2"} {
			if a[k] != v {
				x.t.Errorf("%s = %q, want %q", k, a[k], v)
			}
		}
		tags, err := x.c.ListQueueTags(x.ctx, &sqs.ListQueueTagsInput{QueueUrl: out.QueueUrl})
		if err != nil || tags.Tags["team"] != "a" || tags.Tags["env"] != "test" || len(tags.Tags) != 2 {
			x.t.Fatalf("tags = %v, %v", tags, err)
		}
	}},
	{name: "CreateQueueIdempotent", fn: func(x *target) {
		attrs := map[string]string{"VisibilityTimeout": "40", "DelaySeconds": "0"}
		url := x.createQueue("idem", attrs)
		name := url[strings.LastIndexByte(url, '/')+1:]
		for i := 0; i < 2; i++ {
			out, err := x.c.CreateQueue(x.ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs,
				Tags: map[string]string{"a": "1", "b": "2"}})
			if err != nil {
				x.t.Fatal(err)
			}
			if *out.QueueUrl != url {
				x.t.Fatalf("URL %s, want %s", *out.QueueUrl, url)
			}
		}
	}},
	{name: "CreateQueueConflict", fn: func(x *target) {
		url := x.createQueue("conflict", map[string]string{"VisibilityTimeout": "40"})
		name := url[strings.LastIndexByte(url, '/')+1:]
		_, err := x.c.CreateQueue(x.ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"VisibilityTimeout": "41"}})
		wantTyped[*types.QueueNameExists](x.t, err)
	}},
	{name: "CreateQueueNameRules", fn: func(x *target) {
		if _, err := x.c.CreateQueue(x.ctx, &sqs.CreateQueueInput{QueueName: aws.String("")}); err == nil {
			x.t.Errorf("CreateQueue(\"\") succeeded")
		}
		x.deviation(devNameRules)
		for _, name := range []string{"bad name", "bad!", strings.Repeat("a", 81)} {
			_, err := x.c.CreateQueue(x.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
			if err == nil {
				x.c.DeleteQueue(x.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(name)})
				x.t.Errorf("CreateQueue(%q) succeeded", name)
			}
		}
	}},
	{name: "GetQueueUrlMissing", fn: func(x *target) {
		_, err := x.c.GetQueueUrl(x.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("tq-missing-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
		wantTyped[*types.QueueDoesNotExist](x.t, err)
	}},
	{name: "ListQueuesPrefix", fn: func(x *target) {
		prefix := "tq-lp" + strconv.FormatInt(time.Now().UnixNano(), 36)
		for i := 0; i < 3; i++ {
			x.mustCreate(prefix + "-" + strconv.Itoa(i))
		}
		x.mustCreate("tq-other" + prefix)
		out, err := x.c.ListQueues(x.ctx, &sqs.ListQueuesInput{QueueNamePrefix: &prefix})
		if err != nil || len(out.QueueUrls) != 3 {
			x.t.Fatalf("ListQueues = %v, %v; want 3", out.QueueUrls, err)
		}
	}},
	{name: "ListQueuesPagination", fn: func(x *target) {
		prefix := "tq-pg" + strconv.FormatInt(time.Now().UnixNano(), 36)
		want := map[string]bool{}
		for i := 0; i < 5; i++ {
			want[x.mustCreate(prefix+"-"+strconv.Itoa(i))] = true
		}
		p := sqs.NewListQueuesPaginator(x.c, &sqs.ListQueuesInput{QueueNamePrefix: &prefix, MaxResults: aws.Int32(2)})
		pages := 0
		got := map[string]bool{}
		for p.HasMorePages() {
			out, err := p.NextPage(x.ctx)
			if err != nil {
				x.t.Fatal(err)
			}
			if len(out.QueueUrls) > 2 {
				x.t.Fatalf("page of %d, MaxResults 2", len(out.QueueUrls))
			}
			for _, u := range out.QueueUrls {
				got[u] = true
			}
			pages++
		}
		if pages != 3 || len(got) != 5 {
			x.t.Fatalf("%d pages, %d queues; want 3 and 5", pages, len(got))
		}
	}},
	{name: "DeleteQueue", fn: func(x *target) {
		url := x.createQueue("del", nil)
		if _, err := x.c.DeleteQueue(x.ctx, &sqs.DeleteQueueInput{QueueUrl: &url}); err != nil {
			x.t.Fatal(err)
		}
		_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")})
		wantTyped[*types.QueueDoesNotExist](x.t, err)
		name := url[strings.LastIndexByte(url, '/')+1:]
		_, err = x.c.GetQueueUrl(x.ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		wantTyped[*types.QueueDoesNotExist](x.t, err)
	}},
	{name: "MissingQueueErrors", fn: func(x *target) {
		url := x.createQueue("gone", nil)
		x.c.DeleteQueue(x.ctx, &sqs.DeleteQueueInput{QueueUrl: &url})
		_, err := x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})
		wantTyped[*types.QueueDoesNotExist](x.t, err)
		_, err = x.c.GetQueueAttributes(x.ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url})
		wantTyped[*types.QueueDoesNotExist](x.t, err)
		_, err = x.c.DeleteQueue(x.ctx, &sqs.DeleteQueueInput{QueueUrl: &url})
		wantTyped[*types.QueueDoesNotExist](x.t, err)
		_, err = x.c.PurgeQueue(x.ctx, &sqs.PurgeQueueInput{QueueUrl: &url})
		wantTyped[*types.QueueDoesNotExist](x.t, err)
	}},
	{name: "GetQueueAttributesAll", fn: func(x *target) {
		url := x.createQueue("attrs", nil)
		a := x.attributes(url, types.QueueAttributeNameAll)
		for k, v := range map[string]string{"VisibilityTimeout": "30", "DelaySeconds": "0", "MessageRetentionPeriod": "345600",
			"ReceiveMessageWaitTimeSeconds": "0", "ApproximateNumberOfMessages": "0"} {
			if a[k] != v {
				x.t.Errorf("%s = %q, want %q", k, a[k], v)
			}
		}
		name := url[strings.LastIndexByte(url, '/')+1:]
		if !strings.HasPrefix(a["QueueArn"], "arn:aws:sqs:") || !strings.HasSuffix(a["QueueArn"], ":"+name) {
			x.t.Errorf("QueueArn = %q", a["QueueArn"])
		}
		if ts, err := strconv.ParseInt(a["CreatedTimestamp"], 10, 64); err != nil || ts < 1e9 {
			x.t.Errorf("CreatedTimestamp = %q", a["CreatedTimestamp"])
		}
	}},
	{name: "GetQueueAttributesNamed", fn: func(x *target) {
		url := x.createQueue("named", nil)
		a := x.attributes(url, types.QueueAttributeNameVisibilityTimeout, types.QueueAttributeNameQueueArn)
		if len(a) != 2 || a["VisibilityTimeout"] != "30" || a["QueueArn"] == "" {
			x.t.Fatalf("attributes = %v", a)
		}
	}},
	{name: "SetQueueAttributes", fn: func(x *target) {
		url := x.createQueue("set", nil)
		_, err := x.c.SetQueueAttributes(x.ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url,
			Attributes: map[string]string{"VisibilityTimeout": "60", "DelaySeconds": "5", "ReceiveMessageWaitTimeSeconds": "3"}})
		if err != nil {
			x.t.Fatal(err)
		}
		a := x.attributes(url, types.QueueAttributeNameAll)
		if a["VisibilityTimeout"] != "60" || a["DelaySeconds"] != "5" || a["ReceiveMessageWaitTimeSeconds"] != "3" {
			x.t.Fatalf("attributes = %v", a)
		}
	}},
	{name: "SetQueueAttributesRanges", fn: func(x *target) {
		url := x.createQueue("ranges", nil)
		for k, v := range map[string]string{"VisibilityTimeout": "43201", "DelaySeconds": "901",
			"MessageRetentionPeriod": "59", "ReceiveMessageWaitTimeSeconds": "21", "MaximumMessageSize": "1023"} {
			_, err := x.c.SetQueueAttributes(x.ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{k: v}})
			if err == nil {
				x.t.Errorf("%s=%s accepted", k, v)
				continue
			}
			wantTyped[*types.InvalidAttributeValue](x.t, err)
		}
	}},
	{name: "TagUntagListTags", fn: func(x *target) {
		url := x.createQueue("tags", nil)
		if _, err := x.c.TagQueue(x.ctx, &sqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"a": "1", "b": "2", "c": "3"}}); err != nil {
			x.t.Fatal(err)
		}
		if _, err := x.c.UntagQueue(x.ctx, &sqs.UntagQueueInput{QueueUrl: &url, TagKeys: []string{"b"}}); err != nil {
			x.t.Fatal(err)
		}
		out, err := x.c.ListQueueTags(x.ctx, &sqs.ListQueueTagsInput{QueueUrl: &url})
		if err != nil || len(out.Tags) != 2 || out.Tags["a"] != "1" || out.Tags["c"] != "3" {
			x.t.Fatalf("tags = %v, %v", out, err)
		}
	}},

	// Sending and receiving.
	{name: "SendReceiveDelete", fn: func(x *target) {
		url := x.createQueue("srd", nil)
		sent := x.send(url, "hello")
		if *sent.MD5OfMessageBody != bodyMD5("hello") {
			x.t.Fatalf("MD5OfMessageBody = %s", *sent.MD5OfMessageBody)
		}
		got := x.receive(url, 1)
		if len(got) != 1 || *got[0].Body != "hello" || *got[0].MessageId != *sent.MessageId || *got[0].MD5OfBody != bodyMD5("hello") {
			x.t.Fatalf("received %+v", got)
		}
		if _, err := x.c.DeleteMessage(x.ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: got[0].ReceiptHandle}); err != nil {
			x.t.Fatal(err)
		}
		x.wantCounts(url, "0", "0", "0")
	}},
	{name: "MessageAttributesMD5", fn: func(x *target) {
		url := x.createQueue("md5", nil)
		attrs := map[string]types.MessageAttributeValue{
			"s":      {DataType: aws.String("String"), StringValue: aws.String("wörld ✓")},
			"n":      {DataType: aws.String("Number"), StringValue: aws.String("-12.5e3")},
			"b":      {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
			"custom": {DataType: aws.String("String.json"), StringValue: aws.String(`{"k":1}`)},
			"bc":     {DataType: aws.String("Binary.gz"), BinaryValue: []byte("zz")},
		}
		out, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"), MessageAttributes: attrs})
		if err != nil {
			x.t.Fatal(err)
		}
		want := attributesMD5(attrs)
		if aws.ToString(out.MD5OfMessageAttributes) != want {
			x.t.Fatalf("send MD5OfMessageAttributes = %s, want %s", aws.ToString(out.MD5OfMessageAttributes), want)
		}
		got := x.receive(url, 1)
		if len(got) != 1 {
			x.t.Fatal("no message")
		}
		m := got[0]
		if aws.ToString(m.MD5OfMessageAttributes) != want || attributesMD5(m.MessageAttributes) != want || len(m.MessageAttributes) != 5 {
			x.t.Fatalf("receive MD5OfMessageAttributes = %s, attributes %v", aws.ToString(m.MD5OfMessageAttributes), m.MessageAttributes)
		}
		if string(m.MessageAttributes["b"].BinaryValue) != "\x00\x01\x02\xff" || *m.MessageAttributes["custom"].DataType != "String.json" {
			x.t.Fatalf("attributes = %+v", m.MessageAttributes)
		}
	}},
	{name: "MessageAttributeNamesFilter", fn: func(x *target) {
		url := x.createQueue("filter", nil)
		attrs := map[string]types.MessageAttributeValue{
			"keep": {DataType: aws.String("String"), StringValue: aws.String("1")},
			"drop": {DataType: aws.String("String"), StringValue: aws.String("2")},
		}
		x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("a"), MessageAttributes: attrs})
		x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("b"), MessageAttributes: attrs})
		out, err := x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MessageAttributeNames: []string{"keep"}})
		if err != nil || len(out.Messages) != 1 {
			x.t.Fatal(err)
		}
		if ma := out.Messages[0].MessageAttributes; len(ma) != 1 || ma["keep"].StringValue == nil {
			x.t.Fatalf("named filter gave %v", ma)
		}
		x.deviation(devAttrFilter)
		out, err = x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})
		if err != nil || len(out.Messages) != 1 {
			x.t.Fatal(err)
		}
		if ma := out.Messages[0].MessageAttributes; len(ma) != 0 {
			x.t.Fatalf("no filter gave %v", ma)
		}
	}},
	{name: "SystemAttributes", fn: func(x *target) {
		url := x.createQueue("sys", nil)
		before := time.Now().Add(-time.Minute).UnixMilli()
		x.send(url, "a")
		out, err := x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil || len(out.Messages) != 1 {
			x.t.Fatal(err)
		}
		a := out.Messages[0].Attributes
		if a["ApproximateReceiveCount"] != "1" || a["SenderId"] == "" {
			x.t.Fatalf("attributes = %v", a)
		}
		for _, k := range []string{"SentTimestamp", "ApproximateFirstReceiveTimestamp"} {
			if ms, err := strconv.ParseInt(a[k], 10, 64); err != nil || ms < before {
				x.t.Fatalf("%s = %q", k, a[k])
			}
		}
	}},
	{name: "SystemAttributesNamedAndDeprecated", fn: func(x *target) {
		url := x.createQueue("sysn", nil)
		x.send(url, "a")
		x.send(url, "b")
		out, err := x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp}})
		if err != nil || len(out.Messages) != 1 {
			x.t.Fatal(err)
		}
		if a := out.Messages[0].Attributes; len(a) != 1 || a["SentTimestamp"] == "" {
			x.t.Fatalf("named: %v", a)
		}
		out, err = x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url,
			//lint:ignore SA1019 the deprecated AttributeNames must keep working.
			AttributeNames: []types.QueueAttributeName{"ApproximateReceiveCount"}})
		if err != nil || len(out.Messages) != 1 {
			x.t.Fatal(err)
		}
		if a := out.Messages[0].Attributes; a["ApproximateReceiveCount"] != "1" {
			x.t.Fatalf("deprecated AttributeNames: %v", a)
		}
	}},
	{name: "UnicodeBMPBody", fn: func(x *target) {
		url := x.createQueue("bmp", nil)
		body := "héllo wörld — ✓ 日本語 \t\r\n \uE000\uFFFD"
		x.send(url, body)
		if got := x.receive(url, 1); len(got) != 1 || *got[0].Body != body {
			x.t.Fatalf("got %+v", got)
		}
	}},
	{name: "EmojiBody", fauxqsDeviation: devEmoji, fn: func(x *target) {
		url := x.createQueue("emoji", nil)
		body := "launch 🚀 \U0010FFFD"
		x.send(url, body)
		if got := x.receive(url, 1); len(got) != 1 || *got[0].Body != body {
			x.t.Fatalf("got %+v", got)
		}
	}},
	{name: "InvalidCharacters", fn: func(x *target) {
		url := x.createQueue("badchars", nil)
		for _, body := range []string{"nul \x00", "bell \x07", "\uFFFF"} {
			_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body)})
			wantTyped[*types.InvalidMessageContents](x.t, err)
		}
	}},
	{name: "MaximumMessageSize1MiB", fn: func(x *target) {
		url := x.createQueue("big", map[string]string{"MaximumMessageSize": "1048576"})
		body := strings.Repeat("x", 1<<20)
		x.send(url, body)
		if got := x.receive(url, 1); len(got) != 1 || len(*got[0].Body) != 1<<20 {
			x.t.Fatal("1 MiB message did not round-trip")
		}
		_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body + "x")})
		wantAPIError(x.t, err, "InvalidParameterValue")
	}},
	{name: "QueueMaximumMessageSize", fn: func(x *target) {
		url := x.createQueue("small", map[string]string{"MaximumMessageSize": "1024"})
		x.send(url, strings.Repeat("x", 1024))
		_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(strings.Repeat("x", 1025))})
		wantAPIError(x.t, err, "InvalidParameterValue")
	}},
	{name: "TooManyMessageAttributes", fn: func(x *target) {
		url := x.createQueue("many", nil)
		attrs := map[string]types.MessageAttributeValue{}
		for i := 0; i < 10; i++ {
			attrs[fmt.Sprintf("a%d", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
		}
		if _, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"), MessageAttributes: attrs}); err != nil {
			x.t.Fatalf("10 attributes: %v", err)
		}
		x.deviation(devAttrRules)
		attrs["a10"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
		_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"), MessageAttributes: attrs})
		wantAPIError(x.t, err, "InvalidParameterValue")
	}},
	{name: "InvalidMessageAttribute", fauxqsDeviation: devAttrRules, fn: func(x *target) {
		url := x.createQueue("badattr", nil)
		for name, v := range map[string]types.MessageAttributeValue{
			"num":    {DataType: aws.String("Number"), StringValue: aws.String("abc")},
			"AWS.x":  {DataType: aws.String("String"), StringValue: aws.String("v")},
			"nodata": {DataType: aws.String("Foo"), StringValue: aws.String("v")},
		} {
			_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"),
				MessageAttributes: map[string]types.MessageAttributeValue{name: v}})
			if err == nil {
				x.t.Errorf("attribute %s accepted", name)
			}
		}
	}},
	{name: "DelaySecondsMessage", fn: func(x *target) {
		url := x.createQueue("delay", nil)
		x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("d"), DelaySeconds: 2})
		x.wantCounts(url, "0", "0", "1")
		if got := x.receive(url, 1); len(got) != 0 {
			x.t.Fatal("delayed message received early")
		}
		x.sleep(2100 * time.Millisecond)
		if got := x.receive(url, 1); len(got) != 1 {
			x.t.Fatal("delayed message not received after its delay")
		}
	}},
	{name: "DelaySecondsQueue", fn: func(x *target) {
		url := x.createQueue("qdelay", map[string]string{"DelaySeconds": "1"})
		x.send(url, "d")
		if got := x.receive(url, 1); len(got) != 0 {
			x.t.Fatal("message received before the queue delay")
		}
		x.sleep(1100 * time.Millisecond)
		if got := x.receive(url, 1); len(got) != 1 {
			x.t.Fatal("message not received after the queue delay")
		}
	}},
	{name: "DelaySecondsInvalid", fauxqsDeviation: devDelayRange, fn: func(x *target) {
		url := x.createQueue("baddelay", nil)
		_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("d"), DelaySeconds: 901})
		wantAPIError(x.t, err, "InvalidParameterValue")
	}},
	{name: "SendMessageBatch", fn: func(x *target) {
		url := x.createQueue("batch", nil)
		var entries []types.SendMessageBatchRequestEntry
		for i := 0; i < 10; i++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String(fmt.Sprint("body", i))})
		}
		out, err := x.c.SendMessageBatch(x.ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil || len(out.Successful) != 10 || len(out.Failed) != 0 {
			x.t.Fatalf("batch: %v %+v", err, out)
		}
		for _, s := range out.Successful {
			if *s.MD5OfMessageBody != bodyMD5("body"+strings.TrimPrefix(*s.Id, "e")) {
				x.t.Fatalf("entry %s MD5 %s", *s.Id, *s.MD5OfMessageBody)
			}
		}
		if got := x.receiveAll(url, 10); len(got) != 10 {
			x.t.Fatalf("received %d of 10", len(got))
		}
	}},
	{name: "SendMessageBatchErrors", fn: func(x *target) {
		url := x.createQueue("batcherr", nil)
		e := func(id string) types.SendMessageBatchRequestEntry {
			return types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String("b")}
		}
		_, err := x.c.SendMessageBatch(x.ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{e("a"), e("a")}})
		wantTyped[*types.BatchEntryIdsNotDistinct](x.t, err)
		var eleven []types.SendMessageBatchRequestEntry
		for i := 0; i < 11; i++ {
			eleven = append(eleven, e(fmt.Sprint("i", i)))
		}
		_, err = x.c.SendMessageBatch(x.ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: eleven})
		wantTyped[*types.TooManyEntriesInBatchRequest](x.t, err)
		_, err = x.c.SendMessageBatch(x.ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{}})
		wantTyped[*types.EmptyBatchRequest](x.t, err)
		_, err = x.c.SendMessageBatch(x.ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{e("bad id!")}})
		wantTyped[*types.InvalidBatchEntryId](x.t, err)
	}},
	{name: "SendMessageBatchPartialFailure", fn: func(x *target) {
		url := x.createQueue("partial", nil)
		out, err := x.c.SendMessageBatch(x.ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
			{Id: aws.String("ok"), MessageBody: aws.String("fine")},
			{Id: aws.String("bad"), MessageBody: aws.String("nul \x00")},
		}})
		if err != nil {
			x.t.Fatal(err)
		}
		if len(out.Successful) != 1 || *out.Successful[0].Id != "ok" || len(out.Failed) != 1 || *out.Failed[0].Id != "bad" || !out.Failed[0].SenderFault {
			x.t.Fatalf("batch result %+v", out)
		}
	}},
	{name: "ReceiveMaxNumberOfMessages", fn: func(x *target) {
		url := x.createQueue("max", nil)
		for i := 0; i < 12; i++ {
			x.send(url, fmt.Sprint(i))
		}
		if got := x.receive(url, 3); len(got) == 0 || len(got) > 3 {
			x.t.Fatalf("MaxNumberOfMessages 3 gave %d", len(got))
		}
		_, err := x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 11})
		wantAPIError(x.t, err, "InvalidParameterValue")
		if got := x.receiveAll(url, 9); len(got) != 9 {
			x.t.Fatalf("drained %d of the 9 left", len(got))
		}
	}},
	{name: "LongPollEmptyWaits", fn: func(x *target) {
		url := x.createQueue("lpempty", nil)
		x.longPollWaits(url, 1)
	}},
	{name: "LongPollQueueDefaultWait", fn: func(x *target) {
		url := x.createQueue("lpdefault", map[string]string{"ReceiveMessageWaitTimeSeconds": "1"})
		x.longPollWaits(url, 0)
	}},
	{name: "LongPollWakesOnSend", fn: func(x *target) {
		url := x.createQueue("lpwake", nil)
		done := make(chan []types.Message, 1)
		go func() {
			out, err := x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
			if err != nil {
				x.t.Error(err)
			}
			done <- out.Messages
		}()
		x.waitParked(1)
		start := time.Now()
		x.send(url, "wake")
		select {
		case got := <-done:
			if len(got) != 1 || *got[0].Body != "wake" {
				x.t.Fatalf("got %+v", got)
			}
			if d := time.Since(start); d > time.Second {
				x.t.Fatalf("woke %v after the send", d)
			}
		case <-time.After(5 * time.Second):
			x.t.Fatal("parked receive did not wake on send")
		}
	}},
	{name: "VisibilityTimeoutRedelivery", fn: func(x *target) {
		url := x.createQueue("vt", map[string]string{"VisibilityTimeout": "1"})
		sent := x.send(url, "again")
		first := x.receive(url, 1)
		if len(first) != 1 {
			x.t.Fatal("no first delivery")
		}
		if got := x.receive(url, 1); len(got) != 0 {
			x.t.Fatal("in-flight message delivered twice")
		}
		x.sleep(1200 * time.Millisecond)
		second := x.receive(url, 1)
		if len(second) != 1 || *second[0].MessageId != *sent.MessageId || *second[0].ReceiptHandle == *first[0].ReceiptHandle ||
			second[0].Attributes["ApproximateReceiveCount"] != "2" {
			x.t.Fatalf("redelivery %+v", second)
		}
	}},
	{name: "ReceiveVisibilityTimeoutOverride", fn: func(x *target) {
		url := x.createQueue("vto", nil)
		x.send(url, "m")
		out, err := x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, VisibilityTimeout: 1})
		if err != nil || len(out.Messages) != 1 {
			x.t.Fatal(err)
		}
		x.sleep(1200 * time.Millisecond)
		if got := x.receive(url, 1); len(got) != 1 {
			x.t.Fatal("message not visible after the overridden 1 s timeout (queue default 30 s)")
		}
	}},
	{name: "ApproximateCountsExact", fn: func(x *target) {
		url := x.createQueue("counts", nil)
		for i := 0; i < 3; i++ {
			x.send(url, "m")
		}
		x.wantCounts(url, "3", "0", "0")
		if got := x.receive(url, 1); len(got) != 1 {
			x.t.Fatal("no message")
		}
		x.wantCounts(url, "2", "1", "0")
		x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("d"), DelaySeconds: 60})
		x.wantCounts(url, "2", "1", "1")
	}},
	{name: "ChangeVisibilityToZero", fn: func(x *target) {
		url := x.createQueue("cmv0", nil)
		x.send(url, "m")
		got := x.receive(url, 1)
		if _, err := x.c.ChangeMessageVisibility(x.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: got[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
			x.t.Fatal(err)
		}
		if again := x.receive(url, 1); len(again) != 1 {
			x.t.Fatal("message not visible after ChangeMessageVisibility(0)")
		}
	}},
	{name: "ChangeVisibilityExtend", fn: func(x *target) {
		url := x.createQueue("cmvx", map[string]string{"VisibilityTimeout": "1"})
		x.send(url, "m")
		got := x.receive(url, 1)
		if _, err := x.c.ChangeMessageVisibility(x.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: got[0].ReceiptHandle, VisibilityTimeout: 3}); err != nil {
			x.t.Fatal(err)
		}
		x.sleep(1500 * time.Millisecond)
		if again := x.receive(url, 1); len(again) != 0 {
			x.t.Fatal("message visible before its extended timeout")
		}
		x.sleep(1700 * time.Millisecond)
		if again := x.receive(url, 1); len(again) != 1 {
			x.t.Fatal("message not visible after its extended timeout")
		}
	}},
	{name: "ChangeVisibilityBatch", fn: func(x *target) {
		url := x.createQueue("cmvb", nil)
		x.send(url, "a")
		x.send(url, "b")
		got := x.receiveAll(url, 2)
		if len(got) != 2 {
			x.t.Fatal("want 2 messages")
		}
		out, err := x.c.ChangeMessageVisibilityBatch(x.ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("a"), ReceiptHandle: got[0].ReceiptHandle, VisibilityTimeout: 0},
			{Id: aws.String("b"), ReceiptHandle: got[1].ReceiptHandle, VisibilityTimeout: 0},
			{Id: aws.String("bogus"), ReceiptHandle: aws.String("garbage"), VisibilityTimeout: 0},
		}})
		if err != nil {
			x.t.Fatal(err)
		}
		if len(out.Successful) != 2 || len(out.Failed) != 1 || *out.Failed[0].Id != "bogus" || *out.Failed[0].Code != "ReceiptHandleIsInvalid" {
			x.t.Fatalf("result %+v", out)
		}
		if again := x.receiveAll(url, 2); len(again) != 2 {
			x.t.Fatal("messages not visible again")
		}
	}},
	{name: "DeleteMessageNotRedelivered", fn: func(x *target) {
		url := x.createQueue("delmsg", map[string]string{"VisibilityTimeout": "1"})
		x.send(url, "m")
		got := x.receive(url, 1)
		if _, err := x.c.DeleteMessage(x.ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: got[0].ReceiptHandle}); err != nil {
			x.t.Fatal(err)
		}
		x.sleep(1200 * time.Millisecond)
		if again := x.receive(url, 1); len(again) != 0 {
			x.t.Fatal("deleted message redelivered")
		}
		x.wantCounts(url, "0", "0", "0")
	}},
	{name: "DeleteMessageBatch", fn: func(x *target) {
		url := x.createQueue("delb", nil)
		for i := 0; i < 3; i++ {
			x.send(url, fmt.Sprint(i))
		}
		got := x.receiveAll(url, 3)
		var entries []types.DeleteMessageBatchRequestEntry
		for i, m := range got {
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("d", i)), ReceiptHandle: m.ReceiptHandle})
		}
		out, err := x.c.DeleteMessageBatch(x.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil || len(out.Successful) != 3 || len(out.Failed) != 0 {
			x.t.Fatalf("%v %+v", err, out)
		}
		x.wantCounts(url, "0", "0", "0")
	}},
	{name: "DeleteMessageBogusHandle", fauxqsDeviation: devBogusOne, fn: func(x *target) {
		url := x.createQueue("bogus", nil)
		_, err := x.c.DeleteMessage(x.ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("garbage")})
		wantTyped[*types.ReceiptHandleIsInvalid](x.t, err)
	}},
	{name: "DeleteMessageBatchBogusHandle", fauxqsDeviation: devBogusBatch, fn: func(x *target) {
		url := x.createQueue("bogusb", nil)
		x.send(url, "m")
		got := x.receive(url, 1)
		out, err := x.c.DeleteMessageBatch(x.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("ok"), ReceiptHandle: got[0].ReceiptHandle},
			{Id: aws.String("bogus"), ReceiptHandle: aws.String("garbage")},
		}})
		if err != nil || len(out.Successful) != 1 || len(out.Failed) != 1 || *out.Failed[0].Code != "ReceiptHandleIsInvalid" {
			x.t.Fatalf("%v %+v", err, out)
		}
	}},
	{name: "ChangeVisibilityBogusHandle", fauxqsDeviation: devBogusCMV, fn: func(x *target) {
		url := x.createQueue("boguscmv", nil)
		_, err := x.c.ChangeMessageVisibility(x.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: aws.String("garbage"), VisibilityTimeout: 5})
		wantTyped[*types.ReceiptHandleIsInvalid](x.t, err)
	}},
	{name: "PurgeQueue", fn: func(x *target) {
		url := x.createQueue("purge", nil)
		for i := 0; i < 3; i++ {
			x.send(url, "m")
		}
		x.receive(url, 1)
		if _, err := x.c.PurgeQueue(x.ctx, &sqs.PurgeQueueInput{QueueUrl: &url}); err != nil {
			x.t.Fatal(err)
		}
		x.wantCounts(url, "0", "0", "0")
		if got := x.receive(url, 10); len(got) != 0 {
			x.t.Fatal("purged message received")
		}
	}},

	// Dead-letter queues.
	{name: "RedrivePolicyMovesToDLQ", fn: func(x *target) {
		dlq := x.createQueue("dlq", nil)
		arn := x.attributes(dlq, types.QueueAttributeNameQueueArn)["QueueArn"]
		policy := `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":"2"}`
		src := x.createQueue("src", map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": policy})
		if got := x.attributes(src, types.QueueAttributeNameRedrivePolicy)["RedrivePolicy"]; !strings.Contains(got, arn) {
			x.t.Fatalf("RedrivePolicy read back as %q", got)
		}
		sent := x.send(src, "poison")
		for i := 1; i <= 2; i++ {
			got := x.receive(src, 1)
			if len(got) != 1 || got[0].Attributes["ApproximateReceiveCount"] != strconv.Itoa(i) {
				x.t.Fatalf("receive %d: %+v", i, got)
			}
			x.sleep(1200 * time.Millisecond)
		}
		if got := x.receive(src, 1); len(got) != 0 {
			x.t.Fatal("message received a third time from its source")
		}
		got := x.receive(dlq, 1)
		if len(got) != 1 || *got[0].Body != "poison" || *got[0].MessageId != *sent.MessageId {
			x.t.Fatalf("dead-letter queue holds %+v", got)
		}
	}},
	{name: "ListDeadLetterSourceQueues", fauxqsDeviation: devDLQSources, fn: func(x *target) {
		dlq := x.createQueue("dlq", nil)
		arn := x.attributes(dlq, types.QueueAttributeNameQueueArn)["QueueArn"]
		policy := `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":5}`
		a := x.createQueue("srca", map[string]string{"RedrivePolicy": policy})
		b := x.createQueue("srcb", map[string]string{"RedrivePolicy": policy})
		x.createQueue("unrelated", nil)
		out, err := x.c.ListDeadLetterSourceQueues(x.ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq})
		if err != nil {
			x.t.Fatal(err)
		}
		got := strings.Join(out.QueueUrls, " ")
		if len(out.QueueUrls) != 2 || !strings.Contains(got, a) || !strings.Contains(got, b) {
			x.t.Fatalf("sources = %v", out.QueueUrls)
		}
	}},

	// FIFO queues.
	{name: "FifoNameRules", fn: func(x *target) {
		_, err := x.c.CreateQueue(x.ctx, &sqs.CreateQueueInput{QueueName: aws.String("tq-nofifo-suffix-" + strconv.FormatInt(time.Now().UnixNano(), 36)),
			Attributes: map[string]string{"FifoQueue": "true"}})
		wantAPIError(x.t, err, "InvalidParameterValue")
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		if a := x.attributes(url, types.QueueAttributeNameFifoQueue); a["FifoQueue"] != "true" {
			x.t.Fatalf("FifoQueue = %v", a)
		}
	}},
	{name: "FifoRequiresGroupAndDedup", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"), MessageDeduplicationId: aws.String("d")})
		wantAPIError(x.t, err, "MissingParameter")
		_, err = x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"), MessageGroupId: aws.String("g")})
		wantAPIError(x.t, err, "InvalidParameterValue")
	}},
	{name: "FifoOrderAndSequenceNumber", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		var seqs []string
		for i := 1; i <= 5; i++ {
			out := x.sendFIFO(url, fmt.Sprint("a", i), "a", fmt.Sprint("d", i))
			if out.SequenceNumber == nil {
				x.t.Fatal("no SequenceNumber")
			}
			seqs = append(seqs, *out.SequenceNumber)
		}
		for i := 1; i < len(seqs); i++ {
			if len(seqs[i]) != len(seqs[i-1]) || seqs[i] <= seqs[i-1] {
				x.t.Fatalf("sequence numbers not increasing: %v", seqs)
			}
		}
		var bodies []string
		for _, m := range x.drainFIFO(url, 5) {
			bodies = append(bodies, *m.Body)
			if m.Attributes["MessageGroupId"] != "a" || m.Attributes["SequenceNumber"] == "" || m.Attributes["MessageDeduplicationId"] == "" {
				x.t.Fatalf("FIFO system attributes %v", m.Attributes)
			}
		}
		if strings.Join(bodies, ",") != "a1,a2,a3,a4,a5" {
			x.t.Fatalf("order %v", bodies)
		}
	}},
	{name: "FifoDeduplicationID", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		first := x.sendFIFO(url, "one", "g", "same")
		second := x.sendFIFO(url, "two", "g", "same")
		if *second.MessageId != *first.MessageId || aws.ToString(second.SequenceNumber) != aws.ToString(first.SequenceNumber) {
			x.t.Fatalf("duplicate got %s/%s, original %s/%s", *second.MessageId, aws.ToString(second.SequenceNumber), *first.MessageId, aws.ToString(first.SequenceNumber))
		}
		x.wantCounts(url, "1", "0", "0")
	}},
	{name: "FifoContentBasedDeduplication", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
		a := x.sendFIFO(url, "same body", "g", "")
		b := x.sendFIFO(url, "same body", "g", "")
		x.sendFIFO(url, "other body", "g", "")
		if *a.MessageId != *b.MessageId {
			x.t.Fatal("identical bodies not deduplicated")
		}
		x.wantCounts(url, "2", "0", "0")
	}},
	{name: "FifoGroupLock", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		x.sendFIFO(url, "a1", "a", "1")
		x.sendFIFO(url, "a2", "a", "2")
		x.sendFIFO(url, "b1", "b", "3")
		first := x.receive(url, 1)
		if len(first) != 1 || *first[0].Body != "a1" {
			x.t.Fatalf("first %+v", first)
		}
		next := x.receive(url, 10)
		if len(next) != 1 || *next[0].Body != "b1" {
			x.t.Fatalf("while a1 is in flight got %+v, want only b1", next)
		}
		x.c.DeleteMessage(x.ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: first[0].ReceiptHandle})
		last := x.receive(url, 10)
		if len(last) != 1 || *last[0].Body != "a2" {
			x.t.Fatalf("after deleting a1 got %+v", last)
		}
	}},
	{name: "FifoBatchOrder", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		var entries []types.SendMessageBatchRequestEntry
		for i := 1; i <= 5; i++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String(fmt.Sprint("m", i)),
				MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String(fmt.Sprint("d", i))})
		}
		out, err := x.c.SendMessageBatch(x.ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil || len(out.Successful) != 5 {
			x.t.Fatalf("%v %+v", err, out)
		}
		seqs := map[string]string{}
		for _, r := range out.Successful {
			seqs[*r.Id] = aws.ToString(r.SequenceNumber)
		}
		for i := 2; i <= 5; i++ {
			if prev, cur := seqs[fmt.Sprint("e", i-1)], seqs[fmt.Sprint("e", i)]; prev == "" || len(cur) != len(prev) || cur <= prev {
				x.t.Fatalf("batch sequence numbers %v", seqs)
			}
		}
		var bodies []string
		for _, m := range x.drainFIFO(url, 5) {
			bodies = append(bodies, *m.Body)
		}
		if strings.Join(bodies, ",") != "m1,m2,m3,m4,m5" {
			x.t.Fatalf("order %v", bodies)
		}
	}},
	{name: "FifoReleasedMessageComesBackFirst", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		x.sendFIFO(url, "a1", "a", "1")
		x.sendFIFO(url, "a2", "a", "2")
		first := x.receive(url, 1)
		if len(first) != 1 || *first[0].Body != "a1" {
			x.t.Fatalf("first %+v", first)
		}
		if _, err := x.c.ChangeMessageVisibility(x.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: first[0].ReceiptHandle}); err != nil {
			x.t.Fatal(err)
		}
		again := x.receive(url, 10)
		if len(again) == 0 || *again[0].Body != "a1" || again[0].Attributes["ApproximateReceiveCount"] != "2" {
			x.t.Fatalf("after releasing a1 got %+v, want a1 again first", again)
		}
	}},
	{name: "FifoTimedOutMessagesComeBackInOrder", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true", "VisibilityTimeout": "1"})
		for i := 1; i <= 3; i++ {
			x.sendFIFO(url, fmt.Sprint("a", i), "a", fmt.Sprint(i))
		}
		var first []string
		for _, m := range x.receive(url, 10) {
			first = append(first, *m.Body)
		}
		if len(first) == 0 || first[0] != "a1" {
			x.t.Fatalf("first receive %v", first)
		}
		if got := x.receive(url, 10); len(got) != 0 {
			x.t.Fatalf("group locked, yet got %d messages", len(got))
		}
		x.sleep(1500 * time.Millisecond)
		var bodies []string
		for _, m := range x.drainFIFO(url, 3) {
			bodies = append(bodies, *m.Body)
		}
		if strings.Join(bodies, ",") != "a1,a2,a3" {
			x.t.Fatalf("after the visibility timeout got %v", bodies)
		}
	}},
	{name: "FifoDeduplicationOutlivesDelete", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		first := x.sendFIFO(url, "one", "g", "once")
		x.drainFIFO(url, 1)
		again := x.sendFIFO(url, "one", "g", "once")
		if *again.MessageId != *first.MessageId {
			x.t.Fatalf("a duplicate of a deleted message got a new MessageId %s (first %s)", *again.MessageId, *first.MessageId)
		}
		if got := x.receive(url, 10); len(got) != 0 {
			x.t.Fatalf("a duplicate within the window was delivered: %+v", got)
		}
	}},
	{name: "FifoDeduplicationWindowEnds", fn: func(x *target) {
		if !x.emulated() {
			x.t.Skip("needs five minutes of real time")
		}
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		first := x.sendFIFO(url, "one", "g", "d")
		x.sleep(4 * time.Minute)
		if dup := x.sendFIFO(url, "one", "g", "d"); *dup.MessageId != *first.MessageId {
			x.t.Fatal("deduplicated for less than five minutes")
		}
		x.sleep(61 * time.Second)
		if later := x.sendFIFO(url, "one", "g", "d"); *later.MessageId == *first.MessageId {
			x.t.Fatal("deduplicated after five minutes")
		}
		x.wantCounts(url, "2", "0", "0")
	}},
	{name: "FifoDeduplicationScopeMessageGroup", fauxqsDeviation: devFifoScope, fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true", "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
		a := x.sendFIFO(url, "m", "a", "same")
		b := x.sendFIFO(url, "m", "b", "same")
		a2 := x.sendFIFO(url, "m", "a", "same")
		if *a.MessageId == *b.MessageId || *a2.MessageId != *a.MessageId {
			x.t.Fatalf("ids a %s b %s a again %s: want b new, a again the same", *a.MessageId, *b.MessageId, *a2.MessageId)
		}
		x.wantCounts(url, "2", "0", "0")
	}},
	{name: "FifoIDRules", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		long := strings.Repeat("p", 64) + `!"#$%&'()*+,-./:;<=>?@[\]^_{|}~` + "`"
		x.sendFIFO(url, "m", long, long)
		x.deviation(devFifoIDs)
		std := x.createQueue("s", nil)
		_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &std, MessageBody: aws.String("m"), MessageDeduplicationId: aws.String("d")})
		wantAPIError(x.t, err, "InvalidParameterValue")
		for _, in := range []*sqs.SendMessageInput{
			{QueueUrl: &url, MessageBody: aws.String("m"), MessageGroupId: aws.String("has space"), MessageDeduplicationId: aws.String("d")},
			{QueueUrl: &url, MessageBody: aws.String("m"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String(strings.Repeat("d", 129))},
		} {
			_, err := x.c.SendMessage(x.ctx, in)
			wantAPIError(x.t, err, "InvalidParameterValue")
		}
	}},
	{name: "FifoAttributeRules", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		_, err := x.c.SetQueueAttributes(x.ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"ContentBasedDeduplication": "true"}})
		if err != nil {
			x.t.Fatalf("ContentBasedDeduplication on a FIFO queue: %v", err)
		}
		if a := x.attributes(url, types.QueueAttributeNameContentBasedDeduplication); a["ContentBasedDeduplication"] != "true" {
			x.t.Fatalf("attributes %v", a)
		}
		x.deviation(devFifoAttrs)
		_, err = x.c.CreateQueue(x.ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(x.t, "s")),
			Attributes: map[string]string{"ContentBasedDeduplication": "true"}})
		wantAPIError(x.t, err, "InvalidAttributeName")
		_, err = x.c.SetQueueAttributes(x.ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"DeduplicationScope": "everywhere"}})
		wantAPIError(x.t, err, "InvalidAttributeValue")
	}},
	{name: "FifoGroupsNotInterleaved", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		for i, g := range []string{"a", "b", "a", "b", "a"} {
			x.sendFIFO(url, fmt.Sprint(g, i), g, fmt.Sprint(i))
		}
		x.deviation(devFifoGroups)
		got := x.receive(url, 10)
		var groups []string
		for _, m := range got {
			g := m.Attributes["MessageGroupId"]
			if len(groups) == 0 || groups[len(groups)-1] != g {
				groups = append(groups, g)
			}
		}
		if len(got) == 0 || *got[0].Body != "a0" || len(groups) > 2 || len(groups) == 2 && groups[0] == groups[1] {
			x.t.Fatalf("received groups %v (%d messages): want a's messages together first", groups, len(got))
		}
	}},
	{name: "FifoRejectsMessageDelay", fn: func(x *target) {
		url := x.createQueue("f", map[string]string{"FifoQueue": "true"})
		_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"), MessageGroupId: aws.String("g"),
			MessageDeduplicationId: aws.String("d"), DelaySeconds: 5})
		wantAPIError(x.t, err, "InvalidParameterValue")
	}},

	{name: "QueueUrlMustBeAURL", fn: func(x *target) {
		url := x.createQueue("q", nil)
		name := url[strings.LastIndexByte(url, '/')+1:]
		_, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &name, MessageBody: aws.String("m")})
		x.deviationIf(err == nil, devBareQueueName)
		wantAPIError(x.t, err, "InvalidAddress")
	}},
	{name: "ChangeVisibilityWithStaleHandle", fn: func(x *target) {
		url := x.createQueue("q", map[string]string{"VisibilityTimeout": "1"})
		x.send(url, "m")
		first := x.receive(url, 1)
		x.sleep(1200 * time.Millisecond)
		again := x.receive(url, 1)
		if len(first) != 1 || len(again) != 1 {
			x.t.Fatalf("receives: %d, %d messages", len(first), len(again))
		}
		_, err := x.c.ChangeMessageVisibility(x.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url,
			ReceiptHandle: first[0].ReceiptHandle, VisibilityTimeout: 30})
		x.deviationIf(err == nil || strings.Contains(err.Error(), "MessageNotInflight"), devStaleCMV)
		wantAPIError(x.t, err, "InvalidParameterValue")
		if !strings.Contains(err.Error(), "Message does not exist or is not available for visibility timeout change") {
			x.t.Fatalf("stale handle: %v", err)
		}
	}},

	// Load.
	{name: "LoadFiftyPollersFiveHundredMessages", fn: func(x *target) { x.load(50, 500) }},
}

// drainFIFO receives up to want messages, deleting each batch before the
// next receive: a FIFO group stays locked while a message is in flight, and
// servers differ in how many of a group's messages one receive returns.
func (x *target) drainFIFO(url string, want int) []types.Message {
	x.t.Helper()
	var got []types.Message
	for i := 0; i < 2*want && len(got) < want; i++ {
		batch := x.receive(url, 10)
		for _, m := range batch {
			if _, err := x.c.DeleteMessage(x.ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				x.t.Fatal(err)
			}
		}
		got = append(got, batch...)
	}
	return got
}

func (x *target) mustCreate(name string) string {
	x.t.Helper()
	out, err := x.c.CreateQueue(x.ctx, &sqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		x.t.Fatal(err)
	}
	x.t.Cleanup(func() { _, _ = x.c.DeleteQueue(x.ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return *out.QueueUrl
}

// longPollWaits checks that a receive on an empty queue waits about 1 s
// (wait = WaitTimeSeconds, or 0 for the queue's default) and returns empty.
func (x *target) longPollWaits(url string, wait int32) {
	x.t.Helper()
	start := time.Now()
	done := make(chan []types.Message, 1)
	go func() {
		out, err := x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: wait})
		if err != nil {
			x.t.Error(err)
			done <- nil
			return
		}
		done <- out.Messages
	}()
	x.waitParked(1)
	select {
	case <-done:
		x.t.Fatal("long poll returned before its wait time")
	default:
	}
	x.sleep(time.Second)
	select {
	case got := <-done:
		if len(got) != 0 {
			x.t.Fatalf("got %d messages from an empty queue", len(got))
		}
		if !x.emulated() && time.Since(start) < 900*time.Millisecond {
			x.t.Fatalf("returned after %v", time.Since(start))
		}
	case <-time.After(5 * time.Second):
		x.t.Fatal("long poll did not return after its wait time")
	}
}
