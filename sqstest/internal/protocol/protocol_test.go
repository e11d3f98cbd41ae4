package protocol_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
	"github.com/tempqueues/tempqueues/sqstest/internal/protocol"
)

const base = "http://127.0.0.1:9324"

func TestJSONRequest(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, base+"/", strings.NewReader(`{"QueueUrl":"`+base+`/000000000000/jobs"}`))
	r.Header.Set("X-Amz-Target", "AmazonSQS.PurgeQueue")
	w := httptest.NewRecorder()
	req := protocol.New(w, r)
	if req.Query() || req.ID == "" || w.Header().Get("x-amzn-RequestId") != req.ID {
		t.Fatalf("query %v, id %q, header %q", req.Query(), req.ID, w.Header().Get("x-amzn-RequestId"))
	}
	if e := req.Parse(base, 1<<20); e != nil {
		t.Fatal(e)
	}
	var in api.QueueInput
	if err := req.Decode(&in); err != nil || req.Op != "PurgeQueue" || in.QueueURL != base+"/000000000000/jobs" {
		t.Fatalf("op %q, input %+v, %v", req.Op, in, err)
	}
	req.Fail(api.QueueDoesNotExist())
	res := w.Result()
	if res.StatusCode != http.StatusBadRequest || res.Header.Get("x-amzn-query-error") != "AWS.SimpleQueueService.NonExistentQueue;Sender" ||
		!strings.Contains(w.Body.String(), `"__type":"com.amazonaws.sqs#QueueDoesNotExist"`) {
		t.Errorf("error answer %d %v %s", res.StatusCode, res.Header, w.Body)
	}
}

func TestJSONRequestWithoutTarget(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, base+"/", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req := protocol.New(httptest.NewRecorder(), r)
	if e := req.Parse(base, 1<<20); e == nil || e.Code != "MissingAction" {
		t.Errorf("Parse: %v", e)
	}
}

// A query request names its queue by its path and is answered in XML.
func TestQueryRequest(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, base+"/000000000000/jobs", strings.NewReader("Action=GetQueueAttributes&AttributeName.1=All"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	req := protocol.New(w, r)
	if !req.Query() {
		t.Fatal("a form request is not taken for the query protocol")
	}
	if e := req.Parse(base, 1<<20); e != nil {
		t.Fatal(e)
	}
	var in api.GetQueueAttributesInput
	if err := req.Decode(&in); err != nil || req.Op != "GetQueueAttributes" ||
		in.QueueURL != base+"/000000000000/jobs" || len(in.AttributeNames) != 1 || in.AttributeNames[0] != "All" {
		t.Fatalf("op %q, input %+v, %v", req.Op, in, err)
	}
	if e := req.Reply(&api.AttributesOutput{Attributes: map[string]string{"DelaySeconds": "0"}}); e != nil {
		t.Fatal(e)
	}
	body := w.Body.String()
	for _, want := range []string{"<GetQueueAttributesResponse", "<Name>DelaySeconds</Name><Value>0</Value>", "<RequestId>" + req.ID + "</RequestId>"} {
		if !strings.Contains(body, want) {
			t.Errorf("answer lacks %s: %s", want, body)
		}
	}
}

// The JSON protocol's lone surrogate escapes are marked, not decoded to
// U+FFFD: the server rejects them as SQS does.
func TestLoneSurrogateMarked(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, base+"/", strings.NewReader(`{"QueueUrl":"q","MessageBody":"a\ud83db"}`))
	r.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	req := protocol.New(httptest.NewRecorder(), r)
	if e := req.Parse(base, 1<<20); e != nil {
		t.Fatal(e)
	}
	var in api.SendMessageInput
	if err := req.Decode(&in); err != nil {
		t.Fatal(err)
	}
	if in.MessageBody == nil || *in.MessageBody != "a\uffffb" {
		t.Errorf("body %v, want %q", in.MessageBody, "a\uffffb")
	}
}
