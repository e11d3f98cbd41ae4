package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/awserr"
)

// attributeRows is the number of message attribute rows of the send form.
const attributeRows = 3

// maxFormBytes bounds an action's form: a 1 MiB message body and its
// attributes, URL-encoded.
const maxFormBytes = 4 << 20

// view is what every page template gets.
type view struct {
	Page     string // the navigation entry: queues, temporary, calls
	Title    string
	Where    string
	CSRF     string
	ReadOnly bool
	Emulator bool
	Refresh  int64 // milliseconds
	Notice   string
	Error    string
	Form     url.Values // the values of a form that failed, to show again
	Rows     []int      // attribute rows of the send form
	Data     any
}

// done are the notices a redirect after an action names.
var done = map[string]string{
	"sent":         "Sent message %s.",
	"purged":       "Purged: SQS deletes the messages within 60 seconds.",
	"deleted":      "Deleted queue %s.",
	"move-started": "Started message move task %s.",
	"move-cancel":  "Cancelling the message move task.",
}

func (c *Console) view(r *http.Request, page, title string, data any) *view {
	v := &view{
		Page: page, Title: title, Where: c.opts.Where, CSRF: c.csrf, ReadOnly: c.opts.ReadOnly,
		Emulator: c.opts.Emulator != nil, Refresh: c.opts.Refresh.Milliseconds(), Data: data,
		Form: url.Values{}, Rows: make([]int, attributeRows),
	}
	for i := range v.Rows {
		v.Rows[i] = i
	}
	q := r.URL.Query()
	if f, ok := done[q.Get("done")]; ok {
		if strings.Contains(f, "%s") {
			f = fmt.Sprintf(f, q.Get("id"))
		}
		v.Notice = f
	}
	return v
}

// render writes a page, or only its live part for ?part=live (what the
// page's script fetches to refresh itself).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	name := "layout"
	if r.URL.Query().Get("part") == "live" {
		name = "live"
	}
	var b bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&b, name, v); err != nil {
		c.opts.Logger.Error("tempq console: rendering", "page", page, "err", err)
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// failed renders a page with an error in place of its data.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, page, title string, err error) {
	c.opts.Logger.Warn("tempq console: reading", "page", page, "err", err)
	v := c.view(r, page, title, nil)
	v.Error = apiError(err)
	c.render(w, r, errorStatus(err), page, v)
}

// errorStatus is the HTTP status of a page or action that failed with err.
func errorStatus(err error) int {
	var ae smithy.APIError
	switch {
	case awserr.IsQueueDoesNotExist(err):
		return http.StatusNotFound
	case errors.As(err, &ae) && ae.ErrorFault() != smithy.FaultServer:
		return http.StatusBadRequest
	case errors.Is(err, errBadForm):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// readPage serves a page (its own navigation entry) whose data read
// returns.
func readPage[T any](c *Console, page, title string, read func(context.Context) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := read(r.Context())
		if err != nil {
			c.failed(w, r, page, title, err)
			return
		}
		c.render(w, r, http.StatusOK, page, c.view(r, page, title, data))
	}
}

func (c *Console) queuePage(w http.ResponseWriter, r *http.Request) {
	c.renderQueue(w, r, r.URL.Query().Get("url"), nil)
}

// renderQueue renders a queue's page; after a failed action, with its
// error and form.
func (c *Console) renderQueue(w http.ResponseWriter, r *http.Request, queueURL string, actionErr error) {
	if queueURL == "" {
		c.failed(w, r, "queue", "Queue", fmt.Errorf("%w: no queue named (url=...)", errBadForm))
		return
	}
	d, err := c.detail(r.Context(), queueURL)
	if err != nil {
		c.failed(w, r, "queue", queueName(queueURL), err)
		return
	}
	v := c.view(r, "queues", d.Name, d)
	if actionErr != nil {
		// 200, not the error's status: the page is the answer, and a
		// browser logs a document with an error status as a console
		// error.
		v.Error, v.Notice, v.Form = apiError(actionErr), "", r.PostForm
	}
	c.render(w, r, http.StatusOK, "queue", v)
}

func (c *Console) callsPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "calls", c.view(r, "calls", "Calls", nil))
}

func (c *Console) callsJSON(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(c.callCounts())
}

// errBadForm marks form input the console rejects before any call.
var errBadForm = errors.New("bad form input")

// action wraps an action: it checks the POST, runs fn, and redirects to
// the page fn names (POST, redirect, GET), or shows the queue page again
// with the error (as the API gave it) and the form's values, nothing
// changed.
func (c *Console) action(fn func(ctx context.Context, r *http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "reading the form: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.checkPost(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		to, err := fn(r.Context(), r)
		if err != nil {
			c.renderQueue(w, r, r.PostFormValue("url"), err)
			return
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

// queueLink is the page of a queue, with a notice.
func queueLink(queueURL, notice, id string) string {
	q := url.Values{"url": {queueURL}, "done": {notice}}
	if id != "" {
		q.Set("id", id)
	}
	return Path + "queue?" + q.Encode()
}

func (c *Console) send(ctx context.Context, r *http.Request) (string, error) {
	f := r.PostForm
	in := &sqs.SendMessageInput{QueueUrl: aws.String(f.Get("url")), MessageBody: aws.String(f.Get("body"))}
	if g := f.Get("group"); g != "" {
		in.MessageGroupId = aws.String(g)
	}
	if d := f.Get("dedup"); d != "" {
		in.MessageDeduplicationId = aws.String(d)
	}
	if d := f.Get("delay"); d != "" {
		n, err := strconv.ParseInt(d, 10, 32)
		if err != nil {
			return "", fmt.Errorf("%w: DelaySeconds %q is not a whole number of seconds", errBadForm, d)
		}
		in.DelaySeconds = int32(n)
	}
	for i := range attributeRows {
		name := strings.TrimSpace(f.Get(fmt.Sprint("attr-name-", i)))
		typ, value := f.Get(fmt.Sprint("attr-type-", i)), f.Get(fmt.Sprint("attr-value-", i))
		if name == "" && value == "" {
			continue
		}
		av := types.MessageAttributeValue{DataType: aws.String(typ)}
		if strings.HasPrefix(typ, "Binary") {
			b, err := base64.StdEncoding.DecodeString(value)
			if err != nil {
				return "", fmt.Errorf("%w: the Binary value of attribute %q must be base64", errBadForm, name)
			}
			av.BinaryValue = b
		} else {
			av.StringValue = aws.String(value)
		}
		if in.MessageAttributes == nil {
			in.MessageAttributes = map[string]types.MessageAttributeValue{}
		}
		in.MessageAttributes[name] = av
	}
	out, err := c.client.SendMessage(ctx, in)
	if err != nil {
		return "", err
	}
	return queueLink(f.Get("url"), "sent", aws.ToString(out.MessageId)), nil
}

// confirmed checks a destructive action's confirmation box.
func confirmed(r *http.Request, what string) error {
	if r.PostFormValue("confirm") != "on" {
		return fmt.Errorf("%w: tick the box to confirm that you want to %s", errBadForm, what)
	}
	return nil
}

func (c *Console) purge(ctx context.Context, r *http.Request) (string, error) {
	u := r.PostFormValue("url")
	if err := confirmed(r, "purge "+queueName(u)); err != nil {
		return "", err
	}
	if _, err := c.client.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(u)}); err != nil {
		return "", err
	}
	return queueLink(u, "purged", ""), nil
}

func (c *Console) deleteQueue(ctx context.Context, r *http.Request) (string, error) {
	u := r.PostFormValue("url")
	if err := confirmed(r, "delete "+queueName(u)); err != nil {
		return "", err
	}
	if _, err := c.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
		return "", err
	}
	return Path + "?" + url.Values{"done": {"deleted"}, "id": {queueName(u)}}.Encode(), nil
}

func (c *Console) startMove(ctx context.Context, r *http.Request) (string, error) {
	u := r.PostFormValue("url")
	a, err := c.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", err
	}
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(a.Attributes[string(types.QueueAttributeNameQueueArn)])}
	if d := strings.TrimSpace(r.PostFormValue("destination")); d != "" {
		in.DestinationArn = aws.String(d)
	}
	if s := strings.TrimSpace(r.PostFormValue("rate")); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return "", fmt.Errorf("%w: MaxNumberOfMessagesPerSecond %q is not a whole number", errBadForm, s)
		}
		in.MaxNumberOfMessagesPerSecond = aws.Int32(int32(n))
	}
	out, err := c.client.StartMessageMoveTask(ctx, in)
	if err != nil {
		return "", err
	}
	return queueLink(u, "move-started", shortHandle(aws.ToString(out.TaskHandle))), nil
}

// shortHandle abbreviates a task handle (a long opaque token) for notices.
func shortHandle(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

func (c *Console) cancelMove(ctx context.Context, r *http.Request) (string, error) {
	u := r.PostFormValue("url")
	if _, err := c.client.CancelMessageMoveTask(ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: aws.String(r.PostFormValue("task"))}); err != nil {
		return "", err
	}
	return queueLink(u, "move-cancel", ""), nil
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"age": func(d time.Duration) string {
		switch {
		case d < time.Second:
			return "0s"
		case d < time.Minute:
			return d.Truncate(time.Second).String()
		default:
			return d.Round(time.Second).String()
		}
	},
	"until": func(t time.Time) string { return time.Until(t).Round(time.Second).String() },
	"clock": func(t time.Time) string { return t.Local().Format("15:04:05") },
	"str":   aws.ToString,
	"int64": func(p *int64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(*p, 10)
	},
	"clip": func(s string, n int) string {
		if r := []rune(s); len(r) > n {
			return string(r[:n]) + "…"
		}
		return s
	},
	"attr": func(v types.MessageAttributeValue) string {
		if v.StringValue != nil {
			return *v.StringValue
		}
		return base64.StdEncoding.EncodeToString(v.BinaryValue)
	},
	"pct": func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" },
}
