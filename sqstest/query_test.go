package sqstest_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tempqueues/tempqueues/sqstest"
)

// post sends a raw query-protocol request, as an old SDK or curl would.
func post(t *testing.T, method, target string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodGet {
		target += "?" + form.Encode()
	} else {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func wantContains(t *testing.T, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Fatalf("answer lacks %q:\n%s", p, got)
		}
	}
}

// TestQueryWire checks the query protocol's raw shapes: the forms old SDKs
// send (a QueueUrl implied by a /<account>/<queue> path, GET), binary
// attributes in base64, batch failures and the XML error document.
func TestQueryWire(t *testing.T) {
	srv := sqstest.Start(t)
	st, got := post(t, http.MethodPost, srv.URL(), url.Values{"Action": {"CreateQueue"}, "QueueName": {"wire"},
		"Attribute.1.Name": {"DelaySeconds"}, "Attribute.1.Value": {"0"}, "Tag.1.Key": {"team"}, "Tag.1.Value": {"a"}})
	qurl := srv.URL() + "/000000000000/wire"
	if st != 200 {
		t.Fatalf("CreateQueue: %d %s", st, got)
	}
	wantContains(t, got, `<CreateQueueResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><CreateQueueResult><QueueUrl>`+qurl+`</QueueUrl></CreateQueueResult><ResponseMetadata><RequestId>`)

	// QueueUrl from the path; a binary attribute in base64.
	st, got = post(t, http.MethodPost, qurl, url.Values{"Action": {"SendMessage"}, "MessageBody": {"a<b&c"},
		"MessageAttribute.1.Name": {"bin"}, "MessageAttribute.1.Value.DataType": {"Binary"}, "MessageAttribute.1.Value.BinaryValue": {"AAEC"}})
	if st != 200 {
		t.Fatalf("SendMessage on the queue's path: %d %s", st, got)
	}
	wantContains(t, got, "<SendMessageResult><MessageId>", "<MD5OfMessageBody>", "<MD5OfMessageAttributes>")

	st, got = post(t, http.MethodGet, srv.URL(), url.Values{"Action": {"ReceiveMessage"}, "QueueUrl": {qurl},
		"MessageAttributeName.1": {"All"}, "AttributeName.1": {"ApproximateReceiveCount"}})
	if st != 200 {
		t.Fatalf("ReceiveMessage by GET: %d %s", st, got)
	}
	wantContains(t, got, "<Body>a&lt;b&amp;c</Body>",
		"<Attribute><Name>ApproximateReceiveCount</Name><Value>1</Value></Attribute>",
		"<MessageAttribute><Name>bin</Name><Value><BinaryValue>AAEC</BinaryValue><DataType>Binary</DataType></Value></MessageAttribute>")

	st, got = post(t, http.MethodPost, srv.URL(), url.Values{"Action": {"DeleteMessageBatch"}, "QueueUrl": {qurl},
		"DeleteMessageBatchRequestEntry.1.Id": {"x"}, "DeleteMessageBatchRequestEntry.1.ReceiptHandle": {"bogus"}})
	if st != 200 {
		t.Fatalf("DeleteMessageBatch: %d %s", st, got)
	}
	wantContains(t, got, "<DeleteMessageBatchResult><BatchResultErrorEntry><Id>x</Id><SenderFault>true</SenderFault><Code>ReceiptHandleIsInvalid</Code>")

	_, got = post(t, http.MethodPost, srv.URL(), url.Values{"Action": {"ListQueueTags"}, "QueueUrl": {qurl}})
	wantContains(t, got, "<ListQueueTagsResult><Tag><Key>team</Key><Value>a</Value></Tag></ListQueueTagsResult>")

	st, got = post(t, http.MethodPost, srv.URL(), url.Values{"Action": {"PurgeQueue"}, "QueueUrl": {qurl}})
	if st != 200 || strings.Contains(got, "PurgeQueueResult") {
		t.Fatalf("PurgeQueue: %d, want 200 and no Result element:\n%s", st, got)
	}

	st, got = post(t, http.MethodPost, srv.URL(), url.Values{"Action": {"GetQueueUrl"}, "QueueName": {"missing"}})
	if st != 400 {
		t.Fatalf("GetQueueUrl of a missing queue: status %d", st)
	}
	wantContains(t, got, `<ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><Error><Type>Sender</Type><Code>AWS.SimpleQueueService.NonExistentQueue</Code><Message>`, "</Error><RequestId>")

	st, got = post(t, http.MethodPost, srv.URL(), url.Values{"Action": {"Frobnicate"}})
	if st != 400 {
		t.Fatalf("unknown Action: status %d", st)
	}
	wantContains(t, got, "<Code>InvalidAction</Code>")
}
