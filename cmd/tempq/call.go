package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// defaultGroupID is the message group of what call and send put on a FIFO
// queue without --group-id.
const defaultGroupID = "tempq"

func runCall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("call", "--queue NAME|URL [--timeout 10s] [--attr k=v]... [--group-id ID] [--json] BODY|-", stdout)
	queue := fs.String("queue", "", "request queue, by name or URL (required)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the reply; exit code 3 when it does not come")
	asJSON := fs.Bool("json", false, "print the reply as JSON: body, attributes, request id, round trip")
	attrs := attrFlags{}
	fs.Var(attrs, "attr", "String message attribute name=value (repeatable)")
	groupID := fs.String("group-id", "", "message group of the request, for a FIFO queue (default there: \""+defaultGroupID+"\"); the deduplication id is the request's own")
	server := serverFlags(fs)
	bodyArg, err := parseBodyArg(fs, args)
	if err != nil {
		return err
	}
	if *timeout <= 0 {
		return usageError("--timeout must be positive")
	}
	if err := checkQueueArg("queue", *queue); err != nil {
		return err
	}
	fifo := strings.HasSuffix(queueNameOf(*queue), ".fifo")
	if *groupID != "" && !fifo {
		return usageError("--group-id is for FIFO queues; %s is not one", queueNameOf(*queue))
	}
	body, err := readBody(bodyArg)
	if err != nil {
		return err
	}
	env, err := openSQS(ctx, server, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	queueURL, err := resolveQueue(ctx, env.Client, "queue", *queue)
	if err != nil {
		return err
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}
	switch {
	case *groupID != "":
		in.MessageGroupId = groupID
	case fifo:
		in.MessageGroupId = aws.String(defaultGroupID)
	}
	if len(attrs) > 0 {
		in.MessageAttributes = make(map[string]types.MessageAttributeValue, len(attrs))
		for k, v := range attrs {
			in.MessageAttributes[k] = wire.StringAttribute(v)
		}
	}
	// A one-off caller neither sweeps other processes' queues nor keeps its
	// own: Close deletes the host queue it creates.
	r, err := requester.New(env.Client, func(o *requester.Options) {
		o.DisableSweeping = true
		o.Logger = server.logger(stderr)
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = r.Close(cctx)
	}()
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start := time.Now()
	call, err := r.SendMessageAndGetResponseAsync(cctx, in)
	if err != nil {
		if errors.Is(err, sqsapi.ErrInvalidInput) {
			return flagError(err, nil)
		}
		return err
	}
	reply, err := call.Wait(ctx) // the call ends by itself at --timeout
	rtt := time.Since(start)
	if errors.Is(err, requester.ErrTimeout) {
		return &exitError{code: exitTimeout, err: fmt.Errorf("no reply to request %s within %v: likely no responder serves %s, "+
			"or the responder refused to reply (by default it answers only requesters on its own SQS endpoint, account and region; serve-echo's --allow-reply-to widens that; docs/troubleshooting.md)",
			call.RequestID(), *timeout, queueNameOf(queueURL))}
	}
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintln(stdout, aws.ToString(reply.Body))
		return nil
	}
	out := struct {
		Body       string            `json:"body"`
		Attributes map[string]string `json:"attributes,omitempty"`
		RequestID  string            `json:"request_id"`
		MessageID  string            `json:"message_id"`
		RTTMillis  float64           `json:"rtt_ms"`
	}{Body: aws.ToString(reply.Body), RequestID: call.RequestID(), MessageID: aws.ToString(reply.MessageId), RTTMillis: float64(rtt.Microseconds()) / 1000}
	names := make([]string, 0, len(reply.MessageAttributes))
	for k := range reply.MessageAttributes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == sqsapi.VirtualQueueNameAttribute {
			continue // routing, not content
		}
		if out.Attributes == nil {
			out.Attributes = map[string]string{}
		}
		out.Attributes[k] = aws.ToString(reply.MessageAttributes[k].StringValue)
	}
	return writeJSON(stdout, out)
}
