package console

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// fixture is a console on an sqstest server, served by httptest on
// 127.0.0.1, with a client of its own for the test.
type fixture struct {
	t      *testing.T
	srv    *sqstest.Server
	client *sqs.Client // the test's
	ui     *httptest.Server
	http   *http.Client
}

func newFixture(t *testing.T, optFns ...func(*Options)) *fixture {
	t.Helper()
	srv := sqstest.Start(t)
	counter := new(callcount.Counter)
	consoleClient := srv.Client(func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error { return counter.Register(s) })
	})
	c, err := New(consoleClient, append([]func(*Options){func(o *Options) {
		o.Emulator = srv
		o.Counter = counter
		o.Where = "test"
	}}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	ui := httptest.NewServer(c)
	t.Cleanup(ui.Close)
	return &fixture{
		t: t, srv: srv, client: srv.Client(), ui: ui,
		// Redirects are the test's to see.
		http: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

func (f *fixture) create(name string, attrs map[string]string) string {
	f.t.Helper()
	out, err := f.client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		f.t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// get fetches a console path and returns its status and body.
func (f *fixture) get(path string) (int, string) {
	f.t.Helper()
	resp, err := f.http.Get(f.ui.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post posts a form to a console path.
func (f *fixture) post(path string, form url.Values) (*http.Response, string) {
	f.t.Helper()
	resp, err := f.http.PostForm(f.ui.URL+path, form)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// token reads the CSRF token from a queue page.
func (f *fixture) token(queueURL string) string {
	f.t.Helper()
	_, body := f.get(Path + "queue?url=" + url.QueryEscape(queueURL))
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		f.t.Fatalf("no CSRF token on the queue page: %s", body)
	}
	return m[1]
}

func (f *fixture) messages(queueURL string) []sqstest.Message {
	f.t.Helper()
	msgs, err := f.srv.Messages(queueURL)
	if err != nil {
		f.t.Fatal(err)
	}
	return msgs
}

func TestSendNeedsTheCSRFToken(t *testing.T) {
	f := newFixture(t)
	q := f.create("jobs", nil)
	form := url.Values{"url": {q}, "body": {"hello"}}
	for _, tok := range []string{"", strings.Repeat("0", 64)} {
		form.Set("csrf", tok)
		if resp, body := f.post(Path+"send", form); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Fatalf("token %q: status %d, body %q; want 403 naming the CSRF token", tok, resp.StatusCode, body)
		}
	}
	if n := len(f.messages(q)); n != 0 {
		t.Fatalf("%d messages sent without a valid token", n)
	}
	form.Set("csrf", f.token(q))
	form.Set("attr-name-0", "kind")
	form.Set("attr-type-0", "String")
	form.Set("attr-value-0", "test")
	resp, body := f.post(Path+"send", form)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: status %d, body %q", resp.StatusCode, body)
	}
	msgs := f.messages(q)
	if len(msgs) != 1 || msgs[0].Body != "hello" || aws.ToString(msgs[0].Attributes["kind"].StringValue) != "test" {
		t.Fatalf("queue holds %+v, want one message hello with kind=test", msgs)
	}
	// The redirect's page names the message sent.
	_, page := f.get(resp.Header.Get("Location"))
	if !strings.Contains(page, "Sent message "+msgs[0].ID) {
		t.Fatalf("no notice naming %s after the send", msgs[0].ID)
	}
}

func TestCrossSiteAndForeignHostsAreRefused(t *testing.T) {
	f := newFixture(t)
	q := f.create("jobs", nil)
	form := url.Values{"url": {q}, "body": {"x"}, "csrf": {f.token(q)}}

	req, _ := http.NewRequest(http.MethodPost, f.ui.URL+Path+"send", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := f.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST from another origin: status %d, want 403", resp.StatusCode)
	}

	// A DNS-rebinding page sends its own name as the Host: no page, so no
	// token either.
	req, _ = http.NewRequest(http.MethodGet, f.ui.URL+Path+"queue?url="+url.QueryEscape(q), nil)
	req.Host = "evil.example:80"
	resp, err = f.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(b), "csrf") {
		t.Fatalf("foreign Host: status %d, body %q; want 403 without the page", resp.StatusCode, b)
	}
	if n := len(f.messages(q)); n != 0 {
		t.Fatalf("%d messages sent by refused requests", n)
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:4566": true, "localhost:1": true, "LOCALHOST": true, "[::1]:80": true, "127.0.0.2": true,
		"evil.example": false, "10.0.0.1:4566": false, "localhost.evil.example:80": false, "": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestReadOnlyOffersAndAllowsNoAction(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.ReadOnly = true })
	q := f.create("jobs", nil)
	_, page := f.get(Path + "queue?url=" + url.QueryEscape(q))
	if strings.Contains(page, `action="/ui/send"`) || !strings.Contains(page, "--allow-actions") {
		t.Fatal("a read-only queue page offers the send form, or does not say how to allow actions")
	}
	m := csrfRE.FindStringSubmatch(page)
	tok := ""
	if m != nil {
		tok = m[1]
	}
	for _, path := range []string{"send", "purge", "delete", "move"} {
		resp, body := f.post(Path+path, url.Values{"url": {q}, "body": {"x"}, "confirm": {"on"}, "csrf": {tok}})
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("read-only %s: status %d, body %q", path, resp.StatusCode, body)
		}
	}
	if _, err := f.client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("jobs")}); err != nil {
		t.Fatalf("read-only console deleted the queue: %v", err)
	}
}

// Bad input gets the API's own error, the form comes back with what was
// typed, and nothing changes.
func TestBadInputShowsTheAPIErrorAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	q := f.create("jobs", nil)
	_, apiErr := f.client.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(q), MessageBody: aws.String("b"),
		MessageAttributes: map[string]types.MessageAttributeValue{"n": {DataType: aws.String("Number"), StringValue: aws.String("abc")}},
	})
	if apiErr == nil {
		t.Fatal("the API took a Number attribute of abc")
	}
	form := url.Values{"url": {q}, "body": {"typed body"}, "csrf": {f.token(q)}, "attr-name-0": {"n"}, "attr-type-0": {"Number"}, "attr-value-0": {"abc"}}
	resp, body := f.post(Path+"send", form)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200: the queue page, with the error", resp.StatusCode)
	}
	want := html.EscapeString(apiError(apiErr))
	if !strings.Contains(body, want) {
		t.Fatalf("page does not show the API's error %q:\n%s", want, body)
	}
	if !strings.Contains(body, ">typed body</textarea>") || !strings.Contains(body, `value="abc"`) {
		t.Fatal("the form lost what was typed")
	}
	for _, c := range []url.Values{
		{"url": {q}, "body": {"x"}, "delay": {"soon"}}, // not a number
		{"url": {q}, "confirm": {""}},                  // purge unconfirmed
		{"url": {q + "-missing"}, "body": {"x"}},       // no such queue
		{"url": {q}, "body": {"x"}, "attr-name-0": {"b"}, "attr-type-0": {"Binary"}, "attr-value-0": {"%%"}},
	} {
		c.Set("csrf", f.token(q))
		path := "send"
		if c.Has("confirm") {
			path = "purge"
		}
		if resp, body := f.post(Path+path, c); resp.StatusCode == http.StatusSeeOther || !strings.Contains(body, `class="error"`) {
			t.Errorf("%s %v: status %d, no error shown", path, c, resp.StatusCode)
		}
	}
	if n := len(f.messages(q)); n != 0 {
		t.Fatalf("%d messages after bad input", n)
	}
}

// No GET changes anything: not the counts, not a message's visibility or
// receive count (the peek), whatever the query says.
func TestGetChangesNothing(t *testing.T) {
	f := newFixture(t)
	q := f.create("jobs", nil)
	ctx := context.Background()
	for i := range 3 {
		if _, err := f.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("m" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 1}); err != nil {
		t.Fatal(err)
	}
	before := f.messages(q)
	for _, path := range []string{
		"", "?part=live", "queue?url=" + url.QueryEscape(q), "queue?part=live&url=" + url.QueryEscape(q),
		"temporary", "calls", "calls.json", "send?url=" + url.QueryEscape(q) + "&body=x", "purge?url=" + url.QueryEscape(q) + "&confirm=on",
		"delete?url=" + url.QueryEscape(q) + "&confirm=on",
	} {
		status, body := f.get(Path + path)
		if strings.HasPrefix(path, "send") || strings.HasPrefix(path, "purge") || strings.HasPrefix(path, "delete") {
			if status != http.StatusMethodNotAllowed {
				t.Errorf("GET %s: status %d, want 405", path, status)
			}
			continue
		}
		if status != http.StatusOK {
			t.Errorf("GET %s: status %d: %s", path, status, body)
		}
	}
	after := f.messages(q)
	if len(after) != len(before) {
		t.Fatalf("%d messages before the GETs, %d after", len(before), len(after))
	}
	for i := range before {
		b, a := before[i], after[i]
		if a.ID != b.ID || a.ReceiveCount != b.ReceiveCount || !a.VisibleAt.Equal(b.VisibleAt) {
			t.Errorf("message %s changed: %+v, then %+v", b.ID, b, a)
		}
	}
	_, page := f.get(Path + "queue?url=" + url.QueryEscape(q))
	for _, m := range before {
		if !strings.Contains(page, m.Body) {
			t.Errorf("the peek does not show message %q", m.Body)
		}
	}
	if !strings.Contains(page, "emulator only") {
		t.Error("the peek is not labelled emulator-only")
	}
}

func TestPeekIsEmulatorOnly(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Emulator = nil })
	q := f.create("jobs", nil)
	if _, err := f.client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("secret-body")}); err != nil {
		t.Fatal(err)
	}
	_, page := f.get(Path + "queue?url=" + url.QueryEscape(q))
	if strings.Contains(page, "secret-body") || strings.Contains(page, `id="peek"`) {
		t.Fatal("a console without the emulator shows messages")
	}
	_, list := f.get(Path)
	if !strings.Contains(list, "n/a") {
		t.Error("the oldest message's age is not n/a without the emulator")
	}
}

func TestQueueListShowsTypesAndLinks(t *testing.T) {
	f := newFixture(t)
	dlq := f.create("orders-dlq", nil)
	arn, err := f.srv.QueueAttributes(dlq)
	if err != nil {
		t.Fatal(err)
	}
	f.create("orders", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn["QueueArn"] + `","maxReceiveCount":"3"}`})
	f.create("events.fifo", map[string]string{"FifoQueue": "true"})
	f.create(sqsapi.DefaultQueuePrefix+"sweeper.fifo", map[string]string{"FifoQueue": "true"})
	host := f.create(sqsapi.DefaultQueuePrefix+"0a1b2c3d-0000-4000-8000-000000000000-0", nil)
	ctx := context.Background()
	if _, err := f.client.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(host), Tags: map[string]string{
		sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: strconv.FormatInt(time.Now().Add(-400*time.Second).UnixMilli(), 10),
	}}); err != nil {
		t.Fatal(err)
	}
	_, page := f.get(Path + "?part=live")
	row := func(name string) string {
		i := strings.Index(page, `data-queue="`+name+`"`)
		if i < 0 {
			t.Fatalf("no row for %s in %s", name, page)
		}
		j := strings.Index(page[i:], "</tr>")
		return page[i : i+j]
	}
	for name, want := range map[string][]string{
		"orders-dlq":  {"standard", "DLQ of orders"},
		"orders":      {"→ orders-dlq"},
		"events.fifo": {"FIFO"},
		sqsapi.DefaultQueuePrefix + "sweeper.fifo":                           {"sweeper lease"},
		sqsapi.DefaultQueuePrefix + "0a1b2c3d-0000-4000-8000-000000000000-0": {"temporary host", sqsapi.RetentionTag},
	} {
		r := row(name)
		for _, w := range want {
			if !strings.Contains(r, w) {
				t.Errorf("row %s lacks %q: %s", name, w, r)
			}
		}
	}

	_, tmp := f.get(Path + "temporary?part=live")
	for _, w := range []string{
		sqsapi.DefaultQueuePrefix + "0a1b2c3d-0000-4000-8000-000000000000</code>", // the owner's prefix
		">due<", "<meter", "held", // the token is absent: neither held nor free
	} {
		if w == "held" {
			if !strings.Contains(tmp, "no token") {
				t.Errorf("temporary page: lease without token not reported: %s", tmp)
			}
			continue
		}
		if !strings.Contains(tmp, w) {
			t.Errorf("temporary page lacks %q: %s", w, tmp)
		}
	}
}

// The calls the console makes itself are left out of the emulator's.
func TestCallsLeaveOutTheConsolesOwn(t *testing.T) {
	f := newFixture(t)
	q := f.create("jobs", nil)
	for range 3 {
		if _, err := f.client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x")}); err != nil {
			t.Fatal(err)
		}
	}
	f.get(Path) // the console reads every queue
	f.get(Path)
	var got calls
	resp, err := f.http.Get(f.ui.URL + Path + "calls.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := decodeJSON(resp.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Served["SendMessage"] != 3 || got.Served["CreateQueue"] != 1 || got.Served["ListQueues"] != 0 {
		t.Fatalf("served %v, want 3 SendMessage, 1 CreateQueue and not the console's ListQueues", got.Served)
	}
	if got.Console["ListQueues"] < 2 || got.Console["GetQueueAttributes"] < 2 {
		t.Fatalf("console's own calls %v, want its reads", got.Console)
	}
}

func TestCallsWithoutEmulatorAreTheConsolesOnly(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Emulator = nil })
	f.get(Path)
	got := mustCalls(t, f)
	if got.Served != nil || got.Console["ListQueues"] != 1 {
		t.Fatalf("calls %+v: want no served counts and the console's one ListQueues", got)
	}
	_, page := f.get(Path + "calls")
	if !strings.Contains(page, "calls this console made itself") {
		t.Error("the calls page does not say it shows the console's calls only")
	}
}

func mustCalls(t *testing.T, f *fixture) calls {
	t.Helper()
	resp, err := f.http.Get(f.ui.URL + Path + "calls.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got calls
	if err := decodeJSON(resp.Body, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMissingQueueIsNotFound(t *testing.T) {
	f := newFixture(t)
	status, body := f.get(Path + "queue?url=" + url.QueryEscape(f.srv.URL()+"/000000000000/nope"))
	if status != http.StatusNotFound || !strings.Contains(body, "The specified queue does not exist") {
		t.Fatalf("status %d, body %q", status, body)
	}
	if status, _ := f.get(Path + "queue"); status != http.StatusBadRequest {
		t.Fatalf("no url: status %d, want 400", status)
	}
}

func TestErrorStatus(t *testing.T) {
	if got := errorStatus(errors.New("dial tcp: refused")); got != http.StatusBadGateway {
		t.Errorf("network error: %d, want 502", got)
	}
}

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func TestSendToFIFO(t *testing.T) {
	f := newFixture(t)
	q := f.create("events.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	_, page := f.get(Path + "queue?url=" + url.QueryEscape(q))
	if !strings.Contains(page, `name="group"`) || strings.Contains(page, `name="delay"`) {
		t.Fatal("a FIFO queue's send form lacks the group id, or offers a per-message delay")
	}
	form := url.Values{"url": {q}, "body": {"e1"}, "csrf": {f.token(q)}}
	if resp, body := f.post(Path+"send", form); resp.StatusCode == http.StatusSeeOther || !strings.Contains(body, "MessageGroupId") {
		t.Fatalf("FIFO send without a group: status %d, no error naming MessageGroupId", resp.StatusCode)
	}
	form.Set("group", "g1")
	if resp, _ := f.post(Path+"send", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("FIFO send with a group: status %d", resp.StatusCode)
	}
	if msgs := f.messages(q); len(msgs) != 1 || msgs[0].GroupID != "g1" {
		t.Fatalf("queue holds %+v, want one message of group g1", msgs)
	}
}

var taskRE = regexp.MustCompile(`name="task" value="([^"]+)"`)

// A move task started at one message a second can be watched and
// cancelled from the dead-letter queue's page.
func TestMoveTaskStartAndCancel(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dlq := f.create("jobs-dlq", nil)
	attrs, err := f.srv.QueueAttributes(dlq)
	if err != nil {
		t.Fatal(err)
	}
	src := f.create("jobs", map[string]string{
		"RedrivePolicy":     `{"deadLetterTargetArn":"` + attrs["QueueArn"] + `","maxReceiveCount":"1"}`,
		"VisibilityTimeout": "0",
	})
	for i := range 5 {
		if _, err := f.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for len(f.messages(dlq)) < 5 {
		// Visible again at once: each receive dead-letters what the
		// previous one received.
		if _, err := f.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(src), MaxNumberOfMessages: 10}); err != nil {
			t.Fatal(err)
		}
	}
	_, page := f.get(Path + "queue?url=" + url.QueryEscape(dlq))
	if !strings.Contains(page, `id="move-form"`) || !strings.Contains(page, "DLQ of jobs") {
		t.Fatal("the dead-letter queue's page offers no move task")
	}
	if resp, body := f.post(Path+"move", url.Values{"url": {dlq}, "rate": {"fast"}, "csrf": {f.token(dlq)}}); resp.StatusCode == http.StatusSeeOther || !strings.Contains(body, "MaxNumberOfMessagesPerSecond") {
		t.Fatalf("a rate of fast: status %d, no error naming the parameter", resp.StatusCode)
	}
	resp, body := f.post(Path+"move", url.Values{"url": {dlq}, "rate": {"1"}, "csrf": {f.token(dlq)}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: status %d: %s", resp.StatusCode, body)
	}
	_, live := f.get(Path + "queue?part=live&url=" + url.QueryEscape(dlq))
	m := taskRE.FindStringSubmatch(live)
	if m == nil || !strings.Contains(live, "RUNNING") {
		t.Fatalf("no running task to cancel: %s", live)
	}
	resp, body = f.post(Path+"cancel-move", url.Values{"url": {dlq}, "task": {html.UnescapeString(m[1])}, "csrf": {f.token(dlq)}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: status %d: %s", resp.StatusCode, body)
	}
	_, live = f.get(Path + "queue?part=live&url=" + url.QueryEscape(dlq))
	if !strings.Contains(live, "CANCELLING") && !strings.Contains(live, "CANCELLED") {
		t.Fatalf("the task is not cancelled: %s", live)
	}
}
