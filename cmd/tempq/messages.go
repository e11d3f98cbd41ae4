package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/testkit/sqsenv"
	"github.com/tempqueues/tempqueues/internal/wire"
)

// send and receive: plain messages, no reply expected (call and serve-echo
// are request and response). Like the queue verbs, they check their input
// before any call.

// parseBodyArg parses the flags of a command that takes one BODY
// argument (send, call), wherever the flags stand, and returns it.
func parseBodyArg(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usageError("want exactly one BODY argument (- reads it from stdin)")
	}
	return pos[0], nil
}

// readBody returns the BODY argument, or standard input for "-".
func readBody(arg string) (string, error) {
	if arg != "-" {
		return arg, nil
	}
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		return "", fmt.Errorf("reading the body from stdin: %w", err)
	}
	return string(b), nil
}

func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("send", "--queue NAME|URL [--attr k=v]... [--group-id ID] [--dedup-id ID] [--delay 0s] [--json] BODY|-", stdout)
	queue := fs.String("queue", "", "queue to send to, by name or URL (required)")
	attrs := attrFlags{}
	fs.Var(attrs, "attr", "String message attribute name=value (repeatable, at most 10)")
	groupID := fs.String("group-id", "", "message group, for a FIFO queue (default there: \""+defaultGroupID+"\")")
	dedupID := fs.String("dedup-id", "", "deduplication id, for a FIFO queue (default: the body's hash on a queue with content-based deduplication, else a new id per send)")
	delay := fs.Duration("delay", 0, "keep the message hidden this long, 0s to 15m in whole seconds (standard queues; a FIFO queue's delay is the queue's own)")
	asJSON := fs.Bool("json", false, `print {"message_id": ID} (and "sequence_number" on a FIFO queue)`)
	server := serverFlags(fs)
	bodyArg, err := parseBodyArg(fs, args)
	if err != nil {
		return err
	}
	if err := checkQueueArg("queue", *queue); err != nil {
		return err
	}
	body, err := readBody(bodyArg)
	if err != nil {
		return err
	}
	delaySeconds, err := wholeSeconds("delay", *delay, 0, maxDelay)
	if err != nil {
		return err
	}
	in, err := sendInput(*queue, body, attrs, *groupID, *dedupID, delaySeconds)
	if err != nil {
		return err
	}
	env, queueURL, err := openQueue(ctx, server, stderr, *queue)
	if err != nil {
		return err
	}
	defer env.Close()
	in.QueueUrl = queueURL
	if in.MessageGroupId != nil && in.MessageDeduplicationId == nil && !contentDedup(ctx, env.Client, *in.QueueUrl) {
		// SQS refuses a message for a FIFO queue without content-based
		// deduplication unless it has an id: each send is its own message.
		in.MessageDeduplicationId = aws.String(uuid.NewString())
	}
	out, err := env.Client.SendMessage(ctx, in)
	if err != nil {
		return fmt.Errorf("sending to %s: %w", queueNameOf(*in.QueueUrl), err)
	}
	if *asJSON {
		return writeJSON(stdout, struct {
			MessageID      string `json:"message_id"`
			SequenceNumber string `json:"sequence_number,omitempty"`
		}{aws.ToString(out.MessageId), aws.ToString(out.SequenceNumber)})
	}
	_, err = fmt.Fprintln(stdout, aws.ToString(out.MessageId))
	return err
}

// sendInput checks send's input as SQS would, before any call, and returns
// the message to send (QueueUrl left to fill): errors are usage errors
// naming the flag or argument at fault.
func sendInput(queue, body string, attrs attrFlags, groupID, dedupID string, delay int32) (*sqs.SendMessageInput, error) {
	fifo := strings.HasSuffix(queueNameOf(queue), ".fifo")
	switch {
	case body == "":
		return nil, usageError("BODY is empty: SQS requires at least one character")
	case groupID != "" && !fifo:
		return nil, usageError("--group-id is for FIFO queues; %s is not one", queueNameOf(queue))
	case dedupID != "" && !fifo:
		return nil, usageError("--dedup-id is for FIFO queues; %s is not one", queueNameOf(queue))
	case delay != 0 && fifo:
		return nil, usageError("--delay is for standard queues; FIFO queue %s delays messages by its own delay only", queueNameOf(queue))
	}
	in := &sqs.SendMessageInput{MessageBody: aws.String(body), DelaySeconds: delay}
	if len(attrs) > 0 {
		in.MessageAttributes = make(map[string]types.MessageAttributeValue, len(attrs))
		for k, v := range attrs {
			in.MessageAttributes[k] = wire.StringAttribute(v)
		}
	}
	if fifo {
		in.MessageGroupId = aws.String(defaultGroupID)
		if groupID != "" {
			in.MessageGroupId = aws.String(groupID)
		}
		if dedupID != "" {
			in.MessageDeduplicationId = aws.String(dedupID)
		}
	}
	const op = "tempq send"
	for _, err := range []error{
		wire.CheckMessageAttributes(op, in.MessageAttributes, 0),
		wire.CheckMessageText(op, in.MessageBody, in.MessageAttributes),
		wire.CheckMessageSize(op, in.MessageBody, in.MessageAttributes),
		wire.CheckFIFOSend(op, queueNameOf(queue), in.MessageGroupId, in.MessageDeduplicationId, delay),
	} {
		if err != nil {
			return nil, flagError(err, nil)
		}
	}
	return in, nil
}

// openQueue connects to the server the flags name and resolves the
// --queue flag's queue (a name or URL) there; the caller closes env.
func openQueue(ctx context.Context, server *sqsFlags, stderr io.Writer, queue string) (env *sqsenv.Env, queueURL *string, err error) {
	if env, err = openSQS(ctx, server, stderr); err != nil {
		return nil, nil, err
	}
	u, err := resolveQueue(ctx, env.Client, "queue", queue)
	if err != nil {
		env.Close()
		return nil, nil, err
	}
	return env, aws.String(u), nil
}

// contentDedup reports whether the FIFO queue u has content-based
// deduplication; false when its attributes cannot be read.
func contentDedup(ctx context.Context, client *sqs.Client, u string) bool {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameContentBasedDeduplication},
	})
	return err == nil && out.Attributes[string(types.QueueAttributeNameContentBasedDeduplication)] == "true"
}

// received is a message as receive --json prints it.
type received struct {
	ID            string            `json:"id"`
	Body          string            `json:"body"`
	Attributes    map[string]string `json:"attributes,omitempty"`
	ReceiptHandle string            `json:"receipt_handle"`
	ReceiveCount  int               `json:"receive_count,omitempty"`
	GroupID       string            `json:"group_id,omitempty"`
}

func runReceive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("receive", "--queue NAME|URL [--max 1] [--wait 0s] [--visibility 30s] [--delete] [--json]", stdout)
	queue := fs.String("queue", "", "queue to receive from, by name or URL (required)")
	maxN := fs.Int("max", 1, fmt.Sprintf("receive at most this many messages, 1 to %d", wire.MaxReceiveMessages))
	wait := fs.Duration("wait", 0, fmt.Sprintf("wait up to this long for a message, 0s to %ds in whole seconds (a long poll; on SQS, a short poll of 0s may miss messages)", wire.MaxWaitTimeSeconds))
	visibility := fs.Duration("visibility", 0, "keep the received messages hidden from other receivers this long, 1s to 12h in whole seconds (default: the queue's visibility timeout)")
	del := fs.Bool("delete", false, "delete the messages once printed")
	asJSON := fs.Bool("json", false, "print a JSON array of {id, body, attributes, receipt_handle, receive_count, group_id}; [] when none came")
	server := serverFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := checkQueueArg("queue", *queue); err != nil {
		return err
	}
	if *maxN < 1 || *maxN > wire.MaxReceiveMessages {
		return usageError("--max %d: want 1 to %d", *maxN, wire.MaxReceiveMessages)
	}
	waitSeconds, err := wholeSeconds("wait", *wait, 0, wire.MaxWaitTimeSeconds*time.Second)
	if err != nil {
		return err
	}
	in := &sqs.ReceiveMessageInput{
		MaxNumberOfMessages:   int32(*maxN),
		WaitTimeSeconds:       waitSeconds,
		MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameMessageGroupId,
		},
	}
	if setFlags(fs)["visibility"] {
		// 1s at least: the SDK sends no VisibilityTimeout of 0.
		n, err := wholeSeconds("visibility", *visibility, time.Second, maxHidden)
		if err != nil {
			return err
		}
		in.VisibilityTimeout = n
	}
	env, queueURL, err := openQueue(ctx, server, stderr, *queue)
	if err != nil {
		return err
	}
	defer env.Close()
	in.QueueUrl = queueURL
	out, err := env.Client.ReceiveMessage(ctx, in)
	if err != nil {
		return fmt.Errorf("receiving from %s: %w", queueNameOf(*in.QueueUrl), err)
	}
	if err := printReceived(stdout, out.Messages, *asJSON); err != nil {
		return err
	}
	if !*del || len(out.Messages) == 0 {
		return nil
	}
	return deleteReceived(ctx, env.Client, *in.QueueUrl, out.Messages)
}

// printReceived prints the bodies of msgs, one a line, or a JSON array.
func printReceived(w io.Writer, msgs []types.Message, asJSON bool) error {
	if !asJSON {
		for _, m := range msgs {
			if _, err := fmt.Fprintln(w, aws.ToString(m.Body)); err != nil {
				return err
			}
		}
		return nil
	}
	list := make([]received, 0, len(msgs))
	for _, m := range msgs {
		r := received{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			GroupID: m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]}
		r.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		names := make([]string, 0, len(m.MessageAttributes))
		for k := range m.MessageAttributes {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if r.Attributes == nil {
				r.Attributes = map[string]string{}
			}
			v := m.MessageAttributes[k]
			if v.StringValue != nil {
				r.Attributes[k] = *v.StringValue
			} else {
				r.Attributes[k] = base64.StdEncoding.EncodeToString(v.BinaryValue)
			}
		}
		list = append(list, r)
	}
	return writeJSON(w, list)
}

// deleteReceived deletes msgs (at most 10, one receive's) in one batch.
func deleteReceived(ctx context.Context, client *sqs.Client, u string, msgs []types.Message) error {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	out, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(u), Entries: entries})
	if err != nil {
		return fmt.Errorf("--delete: the messages were printed but not deleted: %w", err)
	}
	if len(out.Failed) > 0 {
		f := out.Failed[0]
		return fmt.Errorf("--delete: %d of %d messages printed were not deleted (first: %s: %s)", len(out.Failed), len(msgs), aws.ToString(f.Code), aws.ToString(f.Message))
	}
	return nil
}
