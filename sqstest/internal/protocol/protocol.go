// Package protocol speaks SQS's two wire protocols for sqstest's server,
// chosen per request: the AWS JSON 1.0 protocol of current SDKs (POST with
// X-Amz-Target: AmazonSQS.<Operation> and a JSON body) and the older query
// protocol (form-encoded Action=<Operation>, XML answers, query.go). A
// Request reads the operation and its input shape (package api) in the
// client's protocol and writes the answer, or the error, back in the same;
// what an operation does is the server's business. Transport carries a
// client's requests to a handler in process.
package protocol

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// Request is one API request being answered.
type Request struct {
	// ID is the request id, sent in the x-amzn-RequestId header and in
	// query answers.
	ID string
	// Op is the operation, e.g. "SendMessage", as far as Parse got: it
	// may be empty or unchecked when Parse failed.
	Op string

	w     http.ResponseWriter
	r     *http.Request
	query bool
	body  []byte     // JSON protocol: the request body
	form  url.Values // query protocol: the parameters
}

// New starts answering r on w: it gives the request its id and picks its
// protocol.
func New(w http.ResponseWriter, r *http.Request) *Request {
	id := uuid.NewString()
	w.Header().Set("x-amzn-RequestId", id)
	return &Request{ID: id, w: w, r: r, query: isQuery(r)}
}

// Query reports whether the request speaks the query protocol.
func (q *Request) Query() bool { return q.query }

// Parse reads the operation and the request's parameters: a body of at
// most maxBytes, and, for the query protocol, the URL's parameters too.
// base is the server's base URL, which a query request's
// /<account>/<queue> path names a queue under.
func (q *Request) Parse(base string, maxBytes int64) *api.Error {
	op, ok := strings.CutPrefix(q.r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	if q.query {
		op = q.r.URL.Query().Get("Action")
		ok = q.r.Method == http.MethodPost || q.r.Method == http.MethodGet
	}
	q.Op = op
	if !q.query && (q.r.Method != http.MethodPost || !ok || op == "") {
		return api.SenderError("MissingAction", "the request has no X-Amz-Target: AmazonSQS.<Operation> header")
	}
	var body []byte
	if q.r.Body != nil { // nil on a client-side request without a body
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(q.w, q.r.Body, maxBytes))
		if err != nil {
			return api.SenderError("RequestEntityTooLarge", "request body too large or unreadable: %v", err)
		}
	}
	if !q.query {
		q.body = markLoneSurrogates(body)
		return nil
	}
	form, aerr := queryForm(q.r, body, base)
	if aerr != nil {
		return aerr
	}
	q.form = form
	q.Op = form.Get("Action")
	if !ok || q.Op == "" {
		return api.SenderError("MissingAction", "the request has no Action parameter")
	}
	return nil
}

// Decode fills in, one of package api's input shapes, from the request
// Parse read.
func (q *Request) Decode(in any) error {
	if q.query {
		if e := decodeQuery(q.Op, q.form, in); e != nil {
			return e
		}
		return nil
	}
	if len(q.body) > 0 {
		if err := json.Unmarshal(q.body, in); err != nil {
			return api.SenderError("SerializationException", "malformed request body: %v", err)
		}
	}
	return nil
}

// Reply writes out, the operation's output shape, as the answer. It
// returns an error, and writes nothing, if out cannot be encoded.
func (q *Request) Reply(out any) *api.Error {
	if q.query {
		q.w.Header().Set("Content-Type", "text/xml")
		_, _ = q.w.Write(encodeQuery(q.Op, q.ID, out))
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return api.NewError(http.StatusInternalServerError, "InternalFailure", "encoding response: %v", err)
	}
	q.w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_, _ = q.w.Write(b)
	return nil
}

// Fail writes e as the answer: in the JSON protocol, e's status, a body
// {"__type": "com.amazonaws.sqs#<Code>", "message": ...} and the
// x-amzn-query-error header the SDK reads the legacy code from; in the
// query protocol, an ErrorResponse document.
func (q *Request) Fail(e *api.Error) {
	h := q.w.Header()
	if q.query {
		h.Set("Content-Type", "text/xml")
		q.w.WriteHeader(e.Status)
		_, _ = q.w.Write(encodeQueryError(e, q.ID))
		return
	}
	fault := "Sender"
	if !e.Sender {
		fault = "Receiver"
	}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("x-amzn-query-error", e.QueryCode+";"+fault)
	q.w.WriteHeader(e.Status)
	b, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{"com.amazonaws.sqs#" + e.Code, e.Msg})
	_, _ = q.w.Write(b)
}
