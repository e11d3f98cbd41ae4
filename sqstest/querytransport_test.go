package sqstest_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// queryTransport makes the Go SDK, which speaks SQS's JSON protocol only,
// exercise the server's query protocol: it rewrites each JSON request into
// the form encoding of the SQS query protocol (as the AWS SDK for Java v1 or
// the AWS CLI 2.9 send it), hands it to the server, checks the shape of the
// XML answer (root <OpResponse> in SQS's namespace, <OpResult>, a
// RequestId) and translates it back into the JSON the SDK parses. The
// translation knows only the SQS service model's member names, never the
// server's code, so every conformance check run through it tests the
// server's query decoder and encoder.
type queryTransport struct{ h http.Handler }

const queryNS = "http://queue.amazonaws.com/doc/2012-11-05/"

func (t queryTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	if !ok {
		return nil, fmt.Errorf("queryTransport: not an SQS JSON request")
	}
	var in map[string]any
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("queryTransport: decoding the SDK's request: %w", err)
	}
	form := url.Values{"Action": {op}, "Version": {"2012-11-05"}}
	flatten(form, op, "", in)

	req := httptest.NewRequest(http.MethodPost, r.URL.String(), strings.NewReader(form.Encode())).WithContext(r.Context())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	res := rec.Result()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	root, err := parseXML(out)
	if err != nil {
		return nil, fmt.Errorf("queryTransport: %s answered invalid XML: %w\n%s", op, err, out)
	}
	if root.ns != queryNS {
		return nil, fmt.Errorf("queryTransport: %s answer has namespace %q", op, root.ns)
	}
	h := http.Header{"X-Amzn-Requestid": res.Header.Values("x-amzn-RequestId")}
	var js []byte
	if res.StatusCode >= 300 {
		js, err = errorJSON(root, h)
	} else {
		js, err = resultJSON(op, root)
	}
	if err != nil {
		return nil, fmt.Errorf("queryTransport: %s: %w\n%s", op, err, out)
	}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	return &http.Response{
		StatusCode: res.StatusCode, Status: res.Status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(js)), ContentLength: int64(len(js)), Request: r,
	}, nil
}

// mapMembers are the SQS model's map-typed members and their query
// encoding: flattened entries named wrap, with key and value members.
var mapMembers = map[string][3]string{
	"Attributes":              {"Attribute", "Name", "Value"},
	"Tags":                    {"Tag", "Key", "Value"},
	"tags":                    {"Tag", "Key", "Value"},
	"MessageAttributes":       {"MessageAttribute", "Name", "Value"},
	"MessageSystemAttributes": {"MessageSystemAttribute", "Name", "Value"},
}

// listMembers are list-typed members whose query name (locationName)
// differs from the JSON one.
var listMembers = map[string]string{
	"AttributeNames":              "AttributeName",
	"MessageSystemAttributeNames": "MessageSystemAttributeName",
	"MessageAttributeNames":       "MessageAttributeName",
	"TagKeys":                     "TagKey",
	"StringListValues":            "StringListValue",
	"BinaryListValues":            "BinaryListValue",
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// flatten writes the JSON value x at prefix in the query encoding.
func flatten(form url.Values, op, prefix string, x any) {
	switch v := x.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			member := v[k]
			if m, ok := mapMembers[k]; ok {
				entries := member.(map[string]any)
				for i, key := range sortedKeys(entries) {
					p := join(prefix, m[0]) + "." + strconv.Itoa(i+1)
					form.Set(p+"."+m[1], key)
					flatten(form, op, p+"."+m[2], entries[key])
				}
				continue
			}
			name := k
			if n, ok := listMembers[k]; ok {
				name = n
			} else if k == "Entries" {
				name = op + "RequestEntry"
			}
			flatten(form, op, join(prefix, name), member)
		}
	case []any:
		for i, e := range v {
			flatten(form, op, prefix+"."+strconv.Itoa(i+1), e)
		}
	case string:
		form.Set(prefix, v)
	case json.Number:
		form.Set(prefix, v.String())
	case bool:
		form.Set(prefix, strconv.FormatBool(v))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// node is a parsed XML element.
type node struct {
	name, ns, text string
	kids           []*node
}

func (n *node) child(name string) *node {
	for _, k := range n.kids {
		if k.name == name {
			return k
		}
	}
	return nil
}

func parseXML(b []byte) (*node, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	var stack []*node
	var root *node
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n := &node{name: t.Name.Local, ns: t.Name.Space}
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				p.kids = append(p.kids, n)
			} else if root == nil {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(t)
			}
		}
	}
	if root == nil {
		return nil, fmt.Errorf("no root element")
	}
	return root, nil
}

// errorJSON turns <ErrorResponse><Error><Type/><Code/><Message/> into the
// JSON protocol's error: the shape name in __type and the query code in
// x-amzn-query-error, as a query-compatible JSON server sends them.
func errorJSON(root *node, h http.Header) ([]byte, error) {
	e := root.child("Error")
	if root.name != "ErrorResponse" || e == nil || e.child("Code") == nil || e.child("Type") == nil ||
		e.child("Message") == nil || root.child("RequestId") == nil {
		return nil, fmt.Errorf("error answer is not <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/>")
	}
	code, typ := e.child("Code").text, e.child("Type").text
	if typ != "Sender" && typ != "Receiver" {
		return nil, fmt.Errorf("error Type %q", typ)
	}
	h.Set("X-Amzn-Query-Error", code+";"+typ)
	// The SQS model's awsQueryError codes, back to shape names.
	shape := strings.TrimPrefix(code, "AWS.SimpleQueueService.")
	switch code {
	case "AWS.SimpleQueueService.NonExistentQueue":
		shape = "QueueDoesNotExist"
	case "QueueAlreadyExists":
		shape = "QueueNameExists"
	}
	return json.Marshal(map[string]string{"__type": "com.amazonaws.sqs#" + shape, "message": e.child("Message").text})
}

// resultJSON turns <OpResponse><OpResult>... into the JSON output of op.
func resultJSON(op string, root *node) ([]byte, error) {
	if root.name != op+"Response" {
		return nil, fmt.Errorf("root element <%s>, want <%sResponse>", root.name, op)
	}
	md := root.child("ResponseMetadata")
	if md == nil || md.child("RequestId") == nil || md.child("RequestId").text == "" {
		return nil, fmt.Errorf("no ResponseMetadata/RequestId")
	}
	out := map[string]any{}
	res := root.child(op + "Result")
	if res == nil {
		return json.Marshal(out)
	}
	for _, k := range res.kids {
		switch k.name {
		case "QueueUrl":
			switch op {
			case "ListQueues":
				out["QueueUrls"] = append(asList(out["QueueUrls"]), k.text)
			case "ListDeadLetterSourceQueues":
				out["queueUrls"] = append(asList(out["queueUrls"]), k.text)
			default:
				out["QueueUrl"] = k.text
			}
		case "Attribute", "Tag":
			addPair(out, k)
		case "Message":
			out["Messages"] = append(asList(out["Messages"]), message(k))
		case "BatchResultErrorEntry":
			out["Failed"] = append(asList(out["Failed"]), leaves(k))
		case "SendMessageBatchResultEntry", "DeleteMessageBatchResultEntry", "ChangeMessageVisibilityBatchResultEntry":
			if k.name != op+"ResultEntry" {
				return nil, fmt.Errorf("<%s> in %s", k.name, op)
			}
			out["Successful"] = append(asList(out["Successful"]), leaves(k))
		case "ListMessageMoveTasksResultEntry":
			out["Results"] = append(asList(out["Results"]), leaves(k))
		default:
			out[k.name] = scalar(k)
		}
	}
	return json.Marshal(out)
}

// numberMembers are the integer members of SQS's outputs outside
// messages, which JSON carries as numbers.
var numberMembers = map[string]bool{
	"ApproximateNumberOfMessagesMoved": true, "ApproximateNumberOfMessagesToMove": true,
	"MaxNumberOfMessagesPerSecond": true, "StartedTimestamp": true,
}

func scalar(k *node) any {
	if numberMembers[k.name] {
		return json.Number(k.text)
	}
	return k.text
}

func asList(x any) []any {
	l, _ := x.([]any)
	return l
}

// addPair adds <Attribute><Name/><Value/></Attribute> to Attributes, or
// <Tag><Key/><Value/></Tag> to Tags.
func addPair(out map[string]any, k *node) {
	member, key := "Attributes", "Name"
	if k.name == "Tag" {
		member, key = "Tags", "Key"
	}
	m, _ := out[member].(map[string]any)
	if m == nil {
		m = map[string]any{}
		out[member] = m
	}
	var name, value string
	if n := k.child(key); n != nil {
		name = n.text
	}
	if v := k.child("Value"); v != nil {
		value = v.text
	}
	m[name] = value
}

// leaves maps an element's scalar children to JSON; SenderFault is the
// one boolean member of SQS's outputs.
func leaves(n *node) map[string]any {
	out := map[string]any{}
	for _, k := range n.kids {
		if k.name == "SenderFault" {
			out[k.name] = k.text == "true"
			continue
		}
		out[k.name] = scalar(k)
	}
	return out
}

func message(n *node) map[string]any {
	out := map[string]any{}
	for _, k := range n.kids {
		switch k.name {
		case "Attribute":
			addPair(out, k)
		case "MessageAttribute":
			attrs, _ := out["MessageAttributes"].(map[string]any)
			if attrs == nil {
				attrs = map[string]any{}
				out["MessageAttributes"] = attrs
			}
			v := map[string]any{}
			if val := k.child("Value"); val != nil {
				for _, f := range val.kids {
					switch f.name {
					case "StringListValue", "BinaryListValue":
						v[f.name+"s"] = append(asList(v[f.name+"s"]), f.text)
					default:
						v[f.name] = f.text
					}
				}
			}
			if name := k.child("Name"); name != nil {
				attrs[name.text] = v
			}
		default:
			out[k.name] = k.text
		}
	}
	return out
}
