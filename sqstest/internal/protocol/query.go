package protocol

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// The SQS query protocol: what AWS SDK for Java v1, older boto3 and
// aws-sdk-go releases and the AWS CLI 2.9 speak. A request is form encoded
// (Action=SendMessage&QueueUrl=...&MessageAttribute.1.Name=...), possibly in
// the URL of a GET, with the queue URL also implied by a /<account>/<queue>
// path; the answer is XML. Requests decode into the JSON protocol's input
// structs and answers encode from its output structs, so both protocols
// share one implementation of the queue semantics.

const queryNamespace = "http://queue.amazonaws.com/doc/2012-11-05/"

// isQuery reports whether r speaks the query protocol: no X-Amz-Target, and
// a form body or an Action in the URL.
func isQuery(r *http.Request) bool {
	if r.Header.Get("X-Amz-Target") != "" {
		return false
	}
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/x-www-form-urlencoded") || r.URL.Query().Get("Action") != ""
}

// queryForm parses a query request's parameters: the body's, then the
// URL's. A QueueUrl absent from both is taken from a /<account>/<queue>
// path.
func queryForm(r *http.Request, body []byte, base string) (url.Values, *api.Error) {
	f, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, api.SenderError("MalformedQueryString", "The request body is not a valid query string: %v", err)
	}
	for k, vs := range r.URL.Query() {
		if _, ok := f[k]; !ok {
			f[k] = vs
		}
	}
	if f.Get("QueueUrl") == "" {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if len(parts) == 2 && parts[0] != "" && parts[1] != "" {
			f.Set("QueueUrl", base+"/"+parts[0]+"/"+parts[1])
		}
	}
	return f, nil
}

// qform reads the query protocol's encodings of scalars, lists and maps.
type qform url.Values

func (f qform) str(k string) string { return url.Values(f).Get(k) }

func (f qform) strp(k string) *string {
	if v, ok := f[k]; ok && len(v) > 0 {
		return &v[0]
	}
	return nil
}

func (f qform) intp(k string) (*int, *api.Error) {
	v := f.strp(k)
	if v == nil {
		return nil, nil
	}
	n, err := strconv.Atoi(*v)
	if err != nil {
		return nil, api.InvalidParameter("Value %s for parameter %s is invalid. Reason: must be an integer.", *v, k)
	}
	return &n, nil
}

// indices returns the N of every parameter named prefix.N or prefix.N.*,
// in increasing order. SQS numbers from 1; gaps are tolerated.
func (f qform) indices(prefix string) []int {
	seen := map[int]bool{}
	for k := range f {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(num); err == nil && n > 0 {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

func item(prefix string, n int) string { return prefix + "." + strconv.Itoa(n) }

// list reads prefix.1, prefix.2, ...: AttributeName.N, TagKey.N.
func (f qform) list(prefix string) []string {
	var out []string
	for _, n := range f.indices(prefix) {
		out = append(out, f.str(item(prefix, n)))
	}
	return out
}

// pairs reads a flattened map: Attribute.N.Name / Attribute.N.Value,
// Tag.N.Key / Tag.N.Value.
func (f qform) pairs(prefix, key, value string) map[string]string {
	idx := f.indices(prefix)
	if len(idx) == 0 {
		return nil
	}
	out := make(map[string]string, len(idx))
	for _, n := range idx {
		p := item(prefix, n)
		out[f.str(p+"."+key)] = f.str(p + "." + value)
	}
	return out
}

// msgAttrs reads MessageAttribute.N.Name and MessageAttribute.N.Value.*
// (DataType, StringValue, BinaryValue in base64, and the list forms).
func (f qform) msgAttrs(prefix string) (map[string]api.AttrValue, *api.Error) {
	idx := f.indices(prefix)
	if len(idx) == 0 {
		return nil, nil
	}
	out := make(map[string]api.AttrValue, len(idx))
	for _, n := range idx {
		p := item(prefix, n)
		v := p + ".Value."
		a := api.AttrValue{DataType: f.str(v + "DataType"), StringValue: f.strp(v + "StringValue")}
		if b := f.strp(v + "BinaryValue"); b != nil {
			raw, err := base64.StdEncoding.DecodeString(*b)
			if err != nil {
				return nil, api.InvalidParameter("The message attribute '%s' has an invalid base64 BinaryValue.", f.str(p+".Name"))
			}
			a.BinaryValue = raw
		}
		a.StringListValues = f.list(v + "StringListValue")
		for _, s := range f.list(v + "BinaryListValue") {
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, api.InvalidParameter("The message attribute '%s' has an invalid base64 BinaryListValue.", f.str(p+".Name"))
			}
			a.BinaryListValues = append(a.BinaryListValues, raw)
		}
		out[f.str(p+".Name")] = a
	}
	return out, nil
}

// send reads a SendMessage request or one batch entry (prefix "" or
// "SendMessageBatchRequestEntry.N.").
func (f qform) send(prefix string, in *api.SendMessageInput) *api.Error {
	var err *api.Error
	in.MessageBody = f.strp(prefix + "MessageBody")
	if in.DelaySeconds, err = f.intp(prefix + "DelaySeconds"); err != nil {
		return err
	}
	if in.MessageAttributes, err = f.msgAttrs(prefix + "MessageAttribute"); err != nil {
		return err
	}
	if in.MessageSystemAttributes, err = f.msgAttrs(prefix + "MessageSystemAttribute"); err != nil {
		return err
	}
	in.MessageDeduplicationID = f.strp(prefix + "MessageDeduplicationId")
	in.MessageGroupID = f.strp(prefix + "MessageGroupId")
	return nil
}

// decodeQuery fills in, one of the JSON protocol's input structs, from the
// query parameters of op.
func decodeQuery(op string, vals url.Values, in any) *api.Error {
	f := qform(vals)
	var err *api.Error
	switch in := in.(type) {
	case *api.CreateQueueInput:
		in.QueueName = f.str("QueueName")
		in.Attributes = f.pairs("Attribute", "Name", "Value")
		in.Tags = f.pairs("Tag", "Key", "Value")
	case *api.GetQueueURLInput:
		in.QueueName = f.str("QueueName")
		in.QueueOwnerAWSAccountID = f.str("QueueOwnerAWSAccountId")
	case *api.ListQueuesInput:
		in.QueueNamePrefix = f.str("QueueNamePrefix")
		in.NextToken = f.str("NextToken")
		in.MaxResults, err = f.intp("MaxResults")
	case *api.ListDLQSourcesInput:
		in.QueueURL = f.str("QueueUrl")
		in.NextToken = f.str("NextToken")
		in.MaxResults, err = f.intp("MaxResults")
	case *api.QueueInput:
		in.QueueURL = f.str("QueueUrl")
	case *api.GetQueueAttributesInput:
		in.QueueURL = f.str("QueueUrl")
		in.AttributeNames = f.list("AttributeName")
	case *api.SetQueueAttributesInput:
		in.QueueURL = f.str("QueueUrl")
		in.Attributes = f.pairs("Attribute", "Name", "Value")
	case *api.TagQueueInput:
		in.QueueURL = f.str("QueueUrl")
		in.Tags = f.pairs("Tag", "Key", "Value")
	case *api.UntagQueueInput:
		in.QueueURL = f.str("QueueUrl")
		in.TagKeys = f.list("TagKey")
	case *api.SendMessageInput:
		in.QueueURL = f.str("QueueUrl")
		err = f.send("", in)
	case *api.SendMessageBatchInput:
		in.QueueURL = f.str("QueueUrl")
		for _, n := range f.indices("SendMessageBatchRequestEntry") {
			p := item("SendMessageBatchRequestEntry", n) + "."
			e := api.SendBatchEntry{ID: f.str(p + "Id")}
			if err = f.send(p, &e.SendMessageInput); err != nil {
				return err
			}
			in.Entries = append(in.Entries, e)
		}
	case *api.ReceiveMessageInput:
		in.QueueURL = f.str("QueueUrl")
		in.AttributeNames = f.list("AttributeName")
		in.MessageSystemAttributeNames = f.list("MessageSystemAttributeName")
		in.MessageAttributeNames = f.list("MessageAttributeName")
		in.ReceiveRequestAttemptID = f.str("ReceiveRequestAttemptId")
		for k, p := range map[string]**int{"MaxNumberOfMessages": &in.MaxNumberOfMessages,
			"VisibilityTimeout": &in.VisibilityTimeout, "WaitTimeSeconds": &in.WaitTimeSeconds} {
			if *p, err = f.intp(k); err != nil {
				return err
			}
		}
	case *api.DeleteMessageInput:
		in.QueueURL = f.str("QueueUrl")
		in.ReceiptHandle = f.str("ReceiptHandle")
	case *api.ChangeVisibilityInput:
		in.QueueURL = f.str("QueueUrl")
		in.ReceiptHandle = f.str("ReceiptHandle")
		in.VisibilityTimeout, err = f.intp("VisibilityTimeout")
	case *api.HandleBatchInput:
		// DeleteMessageBatchRequestEntry.N.*, ChangeMessageVisibilityBatchRequestEntry.N.*
		in.QueueURL = f.str("QueueUrl")
		prefix := op + "RequestEntry"
		for _, n := range f.indices(prefix) {
			p := item(prefix, n) + "."
			e := api.BatchEntry{ID: f.str(p + "Id"), ReceiptHandle: f.str(p + "ReceiptHandle")}
			if e.VisibilityTimeout, err = f.intp(p + "VisibilityTimeout"); err != nil {
				return err
			}
			in.Entries = append(in.Entries, e)
		}
	case *api.StartMoveTaskInput:
		in.SourceArn = f.str("SourceArn")
		in.DestinationArn = f.str("DestinationArn")
		in.MaxNumberOfMessagesPerSecond, err = f.intp("MaxNumberOfMessagesPerSecond")
	case *api.CancelMoveTaskInput:
		in.TaskHandle = f.str("TaskHandle")
	case *api.ListMoveTasksInput:
		in.SourceArn = f.str("SourceArn")
		in.MaxResults, err = f.intp("MaxResults")
	default:
		return api.NewError(http.StatusInternalServerError, "InternalFailure", "sqstest: no query decoder for %T", in)
	}
	return err
}

// xmlw writes an XML answer.
type xmlw struct{ strings.Builder }

func (b *xmlw) text(s string) { _ = xml.EscapeText(b, []byte(s)) }

// elem writes <name>value</name>.
func (b *xmlw) elem(name, value string) {
	b.WriteString("<" + name + ">")
	b.text(value)
	b.WriteString("</" + name + ">")
}

// opt writes <name>value</name> unless value is empty.
func (b *xmlw) opt(name, value string) {
	if value != "" {
		b.elem(name, value)
	}
}

// kv writes a flattened map entry: <wrap><Name>k</Name><Value>v</Value></wrap>.
func (b *xmlw) kv(wrap, key, value string, m map[string]string) {
	for _, k := range sortedKeys(m) {
		b.WriteString("<" + wrap + ">")
		b.elem(key, k)
		b.elem(value, m[k])
		b.WriteString("</" + wrap + ">")
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

func (b *xmlw) sendResult(r *api.SendMessageOutput) {
	b.elem("MessageId", r.MessageID)
	b.elem("MD5OfMessageBody", r.MD5OfMessageBody)
	b.opt("MD5OfMessageAttributes", r.MD5OfMessageAttributes)
	b.opt("MD5OfMessageSystemAttributes", r.MD5OfMessageSystemAttributes)
	b.opt("SequenceNumber", r.SequenceNumber)
}

func (b *xmlw) batchErrors(fs []api.BatchError) {
	for _, e := range fs {
		b.WriteString("<BatchResultErrorEntry>")
		b.elem("Id", e.ID)
		b.elem("SenderFault", strconv.FormatBool(e.SenderFault))
		b.elem("Code", e.Code)
		b.opt("Message", e.Message)
		b.WriteString("</BatchResultErrorEntry>")
	}
}

func (b *xmlw) message(m *api.MessageOutput) {
	b.WriteString("<Message>")
	b.elem("MessageId", m.MessageID)
	b.elem("ReceiptHandle", m.ReceiptHandle)
	b.elem("MD5OfBody", m.MD5OfBody)
	b.elem("Body", m.Body)
	b.kv("Attribute", "Name", "Value", m.Attributes)
	b.opt("MD5OfMessageAttributes", m.MD5OfMessageAttributes)
	for _, n := range sortedKeys(m.MessageAttributes) {
		a := m.MessageAttributes[n]
		b.WriteString("<MessageAttribute>")
		b.elem("Name", n)
		b.WriteString("<Value>")
		if a.StringValue != nil {
			b.elem("StringValue", *a.StringValue)
		}
		if a.BinaryValue != nil {
			b.elem("BinaryValue", base64.StdEncoding.EncodeToString(a.BinaryValue))
		}
		for _, s := range a.StringListValues {
			b.elem("StringListValue", s)
		}
		for _, v := range a.BinaryListValues {
			b.elem("BinaryListValue", base64.StdEncoding.EncodeToString(v))
		}
		b.elem("DataType", a.DataType)
		b.WriteString("</Value></MessageAttribute>")
	}
	b.WriteString("</Message>")
}

// encodeQuery renders op's answer out (one of the JSON protocol's output
// structs) as SQS's XML: <OpResponse><OpResult>...</OpResult>
// <ResponseMetadata><RequestId>...; operations without output have no
// Result element.
func encodeQuery(op, reqID string, out any) []byte {
	var b xmlw
	b.WriteString(`<?xml version="1.0"?>` + "\n")
	b.WriteString("<" + op + `Response xmlns="` + queryNamespace + `">`)
	if _, none := out.(*api.Empty); !none {
		b.WriteString("<" + op + "Result>")
		switch o := out.(type) {
		case *api.QueueURLOutput:
			b.elem("QueueUrl", o.QueueURL)
		case *api.ListQueuesOutput:
			for _, u := range o.QueueURLs {
				b.elem("QueueUrl", u)
			}
			b.opt("NextToken", o.NextToken)
		case *api.ListDLQSourcesOutput:
			for _, u := range o.QueueURLs {
				b.elem("QueueUrl", u)
			}
			b.opt("NextToken", o.NextToken)
		case *api.AttributesOutput:
			b.kv("Attribute", "Name", "Value", o.Attributes)
		case *api.ListQueueTagsOutput:
			b.kv("Tag", "Key", "Value", o.Tags)
		case *api.SendMessageOutput:
			b.sendResult(o)
		case *api.SendMessageBatchOutput:
			for i := range o.Successful {
				b.WriteString("<SendMessageBatchResultEntry>")
				b.elem("Id", o.Successful[i].ID)
				b.sendResult(&o.Successful[i].SendMessageOutput)
				b.WriteString("</SendMessageBatchResultEntry>")
			}
			b.batchErrors(o.Failed)
		case *api.ReceiveMessageOutput:
			for i := range o.Messages {
				b.message(&o.Messages[i])
			}
		case *api.StartMoveTaskOutput:
			b.elem("TaskHandle", o.TaskHandle)
		case *api.CancelMoveTaskOutput:
			b.elem("ApproximateNumberOfMessagesMoved", strconv.FormatInt(o.ApproximateNumberOfMessagesMoved, 10))
		case *api.ListMoveTasksOutput:
			for _, e := range o.Results {
				b.WriteString("<ListMessageMoveTasksResultEntry>")
				b.opt("TaskHandle", e.TaskHandle)
				b.elem("Status", e.Status)
				b.elem("SourceArn", e.SourceArn)
				b.opt("DestinationArn", e.DestinationArn)
				if e.MaxNumberOfMessagesPerSecond != nil {
					b.elem("MaxNumberOfMessagesPerSecond", strconv.Itoa(*e.MaxNumberOfMessagesPerSecond))
				}
				b.elem("ApproximateNumberOfMessagesMoved", strconv.FormatInt(e.ApproximateNumberOfMessagesMoved, 10))
				if e.ApproximateNumberOfMessagesToMove != nil {
					b.elem("ApproximateNumberOfMessagesToMove", strconv.FormatInt(*e.ApproximateNumberOfMessagesToMove, 10))
				}
				b.opt("FailureReason", e.FailureReason)
				b.elem("StartedTimestamp", strconv.FormatInt(e.StartedTimestamp, 10))
				b.WriteString("</ListMessageMoveTasksResultEntry>")
			}
		case *api.HandleBatchOutput:
			for _, id := range o.Successful {
				b.WriteString("<" + op + "ResultEntry>")
				b.elem("Id", id.ID)
				b.WriteString("</" + op + "ResultEntry>")
			}
			b.batchErrors(o.Failed)
		}
		b.WriteString("</" + op + "Result>")
	}
	b.WriteString("<ResponseMetadata>")
	b.elem("RequestId", reqID)
	b.WriteString("</ResponseMetadata></" + op + "Response>\n")
	return []byte(b.String())
}

// encodeQueryError renders e as SQS's query-protocol error document, with
// the legacy error code (AWS.SimpleQueueService.NonExistentQueue) that
// query clients match on.
func encodeQueryError(e *api.Error, reqID string) []byte {
	var b xmlw
	b.WriteString(`<?xml version="1.0"?>` + "\n")
	b.WriteString(`<ErrorResponse xmlns="` + queryNamespace + `"><Error>`)
	fault := "Sender"
	if !e.Sender {
		fault = "Receiver"
	}
	b.elem("Type", fault)
	b.elem("Code", e.QueryCode)
	b.elem("Message", e.Msg)
	b.WriteString("<Detail/></Error>")
	b.elem("RequestId", reqID)
	b.WriteString("</ErrorResponse>\n")
	return []byte(b.String())
}
