package sqstest_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tempqueues/tempqueues/sqstest"
)

// postJSON sends one JSON-protocol request as raw bytes, as a client in
// another language would: the Go SDK cannot write a lone surrogate.
func postJSON(t *testing.T, srv *sqstest.Server, op, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// A lone UTF-16 surrogate in a JSON string is rejected with
// InvalidMessageContents wherever SQS checks characters (bodies, string
// attribute values, batch entries), as the query protocol rejects the same
// character; a proper pair, and an escaped backslash before "ud83d", pass.
func TestLoneSurrogateRejected(t *testing.T) {
	srv := sqstest.Start(t)
	if st, got := postJSON(t, srv, "CreateQueue", `{"QueueName":"s"}`); st != 200 {
		t.Fatalf("CreateQueue: %d %s", st, got)
	}
	q := srv.URL() + "/000000000000/s"
	send := func(body string) (int, string) {
		return postJSON(t, srv, "SendMessage", `{"QueueUrl":"`+q+`",`+body+`}`)
	}
	for name, body := range map[string]string{
		"high alone":        `"MessageBody":"a\ud83d"`,
		"high at the end":   `"MessageBody":"\uD83D"`,
		"low alone":         `"MessageBody":"\ude00b"`,
		"two highs":         `"MessageBody":"\ud83d\ud83d\ude00"`,
		"attribute value":   `"MessageBody":"ok","MessageAttributes":{"a":{"DataType":"String","StringValue":"x\udc00"}}`,
		"high then escaped": `"MessageBody":"\ud83d\n"`,
	} {
		st, got := send(body)
		if st != 400 || !strings.Contains(got, "InvalidMessageContents") {
			t.Errorf("%s: %d %s, want 400 InvalidMessageContents", name, st, got)
		}
	}
	st, got := postJSON(t, srv, "SendMessageBatch", `{"QueueUrl":"`+q+`","Entries":[{"Id":"bad","MessageBody":"\ud83d"},{"Id":"good","MessageBody":"fine"}]}`)
	if st != 200 || !strings.Contains(got, `"Code":"InvalidMessageContents"`) || !strings.Contains(got, `"Id":"good"`) {
		t.Errorf("batch: %d %s", st, got)
	}
	for _, body := range []string{`"MessageBody":"\ud83d\ude00"`, `"MessageBody":"\\ud83d"`} {
		if st, got := send(body); st != 200 {
			t.Errorf("%s: %d %s", body, st, got)
		}
	}
	msgs, err := srv.Messages("s")
	if err != nil || len(msgs) != 3 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	if msgs[1].Body != "\U0001F600" || msgs[2].Body != `\ud83d` {
		t.Fatalf("bodies %q, %q", msgs[1].Body, msgs[2].Body)
	}

	// The query protocol carries the same character as the UTF-8 encoding
	// of the surrogate, which is invalid UTF-8, and rejects it the same way.
	st, got = post(t, http.MethodPost, srv.URL(), url.Values{"Action": {"SendMessage"}, "QueueUrl": {q},
		"MessageBody": {"a\xed\xa0\xbd"}})
	if st != 400 || !strings.Contains(got, "InvalidMessageContents") {
		t.Fatalf("query: %d %s", st, got)
	}
}
