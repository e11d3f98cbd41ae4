package sqstest_test

import (
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// moveTaskChecks are the conformance checks of message move tasks, SQS's
// dead-letter queue redrive; checks appends them.
var moveTaskChecks = []check{
	{name: "MessageMoveTaskBackToSources", fn: func(x *target) {
		dlq, arn, policy := x.deadLetterQueue()
		a := x.createQueue("srca", map[string]string{"VisibilityTimeout": "0", "RedrivePolicy": policy})
		b := x.createQueue("srcb", map[string]string{"VisibilityTimeout": "0", "RedrivePolicy": policy})
		x.deadLetter(a, dlq, "a1", "a2")
		x.deadLetter(b, dlq, "b1")
		out, err := x.c.StartMessageMoveTask(x.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &arn})
		x.deviationIf(unknownAction(err), devMoveTasks)
		if err != nil {
			x.t.Fatal(err)
		}
		if aws.ToString(out.TaskHandle) == "" {
			x.t.Fatal("no TaskHandle")
		}
		task := x.waitMoveTask(arn)
		if aws.ToString(task.Status) != "COMPLETED" || task.ApproximateNumberOfMessagesMoved != 3 ||
			aws.ToInt64(task.ApproximateNumberOfMessagesToMove) != 3 || task.TaskHandle != nil ||
			task.DestinationArn != nil || task.MaxNumberOfMessagesPerSecond != nil ||
			aws.ToString(task.SourceArn) != arn || task.StartedTimestamp <= 0 {
			x.t.Fatalf("finished task %s", describeTask(task))
		}
		x.wantCounts(dlq, "0", "0", "0")
		for url, want := range map[string]int{a: 2, b: 1} {
			got := x.receiveAll(url, want)
			if len(got) != want {
				x.t.Fatalf("%d messages back in a source, want %d", len(got), want)
			}
			for _, m := range got {
				if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["DeadLetterQueueSourceArn"] != "" {
					x.t.Fatalf("a redriven message: %v", m.Attributes)
				}
			}
		}
	}},
	{name: "MessageMoveTaskRateAndCancel", fn: func(x *target) {
		if !x.emulated() {
			x.t.Skip("counts the messages moved each second of the server's clock")
		}
		dlq, arn, policy := x.deadLetterQueue()
		src := x.createQueue("src", map[string]string{"VisibilityTimeout": "0", "RedrivePolicy": policy})
		dest := x.createQueue("dest", nil)
		destARN := x.attributes(dest, types.QueueAttributeNameQueueArn)["QueueArn"]
		x.deadLetter(src, dlq, "1", "2", "3", "4", "5")
		out, err := x.c.StartMessageMoveTask(x.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &arn,
			DestinationArn: &destARN, MaxNumberOfMessagesPerSecond: aws.Int32(2)})
		if err != nil {
			x.t.Fatal(err)
		}
		task := x.moveTask(arn)
		if aws.ToString(task.Status) != "RUNNING" || task.ApproximateNumberOfMessagesMoved != 2 ||
			aws.ToInt64(task.ApproximateNumberOfMessagesToMove) != 5 || aws.ToString(task.TaskHandle) != aws.ToString(out.TaskHandle) ||
			aws.ToString(task.DestinationArn) != destARN || aws.ToInt32(task.MaxNumberOfMessagesPerSecond) != 2 {
			x.t.Fatalf("task after its start %s", describeTask(task))
		}
		_, err = x.c.StartMessageMoveTask(x.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &arn})
		wantAPIError(x.t, err, "InvalidParameterValue") // one active task per source
		x.sleep(time.Second)
		if task := x.moveTask(arn); task.ApproximateNumberOfMessagesMoved != 4 {
			x.t.Fatalf("a second later %s", describeTask(task))
		}
		cancel, err := x.c.CancelMessageMoveTask(x.ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: out.TaskHandle})
		if err != nil || cancel.ApproximateNumberOfMessagesMoved != 4 {
			x.t.Fatalf("cancel: %v, %+v", err, cancel)
		}
		if task := x.moveTask(arn); aws.ToString(task.Status) != "CANCELLING" {
			x.t.Fatalf("after the cancel %s", describeTask(task))
		}
		_, err = x.c.CancelMessageMoveTask(x.ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: out.TaskHandle})
		wantAPIError(x.t, err, "ResourceNotFoundException")
		x.sleep(time.Second)
		if task := x.moveTask(arn); aws.ToString(task.Status) != "CANCELLED" || task.ApproximateNumberOfMessagesMoved != 4 || task.TaskHandle != nil {
			x.t.Fatalf("a second after the cancel %s", describeTask(task))
		}
		x.wantCounts(dlq, "1", "0", "0")
		x.wantCounts(dest, "4", "0", "0")
		// The source is free again; the list shows the newest first.
		if _, err := x.c.StartMessageMoveTask(x.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &arn, DestinationArn: &destARN}); err != nil {
			x.t.Fatal(err)
		}
		list, err := x.c.ListMessageMoveTasks(x.ctx, &sqs.ListMessageMoveTasksInput{SourceArn: &arn, MaxResults: aws.Int32(10)})
		if err != nil || len(list.Results) != 2 || aws.ToString(list.Results[0].Status) != "COMPLETED" ||
			aws.ToString(list.Results[1].Status) != "CANCELLED" || list.Results[0].ApproximateNumberOfMessagesMoved != 1 {
			x.t.Fatalf("list: %v, %d tasks", err, len(list.Results))
		}
		x.wantCounts(dest, "5", "0", "0")
	}},
	{name: "MessageMoveTaskErrors", fn: func(x *target) {
		dlq, arn, policy := x.deadLetterQueue()
		x.createQueue("src", map[string]string{"RedrivePolicy": policy})
		plain := x.createQueue("plain", nil)
		plainARN := x.attributes(plain, types.QueueAttributeNameQueueArn)["QueueArn"]
		_, err := x.c.StartMessageMoveTask(x.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &plainARN})
		x.deviationIf(unknownAction(err), devMoveTasks)
		wantAPIError(x.t, err, "InvalidParameterValue") // not a dead-letter queue
		missing := arn + "-missing"
		_, err = x.c.StartMessageMoveTask(x.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &missing})
		wantAPIError(x.t, err, "ResourceNotFoundException")
		_, err = x.c.StartMessageMoveTask(x.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &arn, DestinationArn: &missing})
		wantAPIError(x.t, err, "ResourceNotFoundException")
		_, err = x.c.StartMessageMoveTask(x.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &arn, MaxNumberOfMessagesPerSecond: aws.Int32(501)})
		wantAPIError(x.t, err, "InvalidParameterValue")
		_, err = x.c.CancelMessageMoveTask(x.ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: aws.String("not-a-task-handle")})
		wantAPIError(x.t, err, "InvalidParameterValue")
		_, err = x.c.ListMessageMoveTasks(x.ctx, &sqs.ListMessageMoveTasksInput{SourceArn: &arn, MaxResults: aws.Int32(11)})
		wantAPIError(x.t, err, "InvalidParameterValue")
		list, err := x.c.ListMessageMoveTasks(x.ctx, &sqs.ListMessageMoveTasksInput{SourceArn: &arn})
		if err != nil || len(list.Results) != 0 {
			x.t.Fatalf("a dead-letter queue without tasks lists %v, %v", list, err)
		}
		_ = dlq
	}},
}

// deadLetterQueue creates a queue to name in a RedrivePolicy, with
// maxReceiveCount 1.
func (x *target) deadLetterQueue() (url, arn, policy string) {
	x.t.Helper()
	url = x.createQueue("dlq", nil)
	arn = x.attributes(url, types.QueueAttributeNameQueueArn)["QueueArn"]
	return url, arn, `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":"1"}`
}

// deadLetter sends bodies to src (VisibilityTimeout 0, maxReceiveCount 1)
// and receives until they have all moved to dlq.
func (x *target) deadLetter(src, dlq string, bodies ...string) {
	x.t.Helper()
	had, _, _ := x.counts(dlq)
	n, _ := strconv.Atoi(had)
	for _, b := range bodies {
		x.send(src, b)
	}
	want := strconv.Itoa(n + len(bodies))
	for i := 0; i < 20; i++ {
		x.receive(src, 10)
		if v, _, _ := x.counts(dlq); v == want {
			return
		}
	}
	v, _, _ := x.counts(dlq)
	x.t.Fatalf("%s of %s messages dead-lettered", v, want)
}

// moveTask returns the newest move task of source.
func (x *target) moveTask(source string) types.ListMessageMoveTasksResultEntry {
	x.t.Helper()
	out, err := x.c.ListMessageMoveTasks(x.ctx, &sqs.ListMessageMoveTasksInput{SourceArn: &source})
	if err != nil || len(out.Results) != 1 {
		x.t.Fatalf("ListMessageMoveTasks: %v, %+v", err, out)
	}
	return out.Results[0]
}

// waitMoveTask returns the newest task of source once it is not RUNNING
// (sqstest finishes a task without a rate at once).
func (x *target) waitMoveTask(source string) types.ListMessageMoveTasksResultEntry {
	x.t.Helper()
	for i := 0; ; i++ {
		task := x.moveTask(source)
		if aws.ToString(task.Status) != "RUNNING" || i == 100 {
			return task
		}
		x.sleep(100 * time.Millisecond)
	}
}

func unknownAction(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidAction"
}

func describeTask(t types.ListMessageMoveTasksResultEntry) string {
	return "status " + aws.ToString(t.Status) + ", moved " + strconv.FormatInt(t.ApproximateNumberOfMessagesMoved, 10) +
		" of " + strconv.FormatInt(aws.ToInt64(t.ApproximateNumberOfMessagesToMove), 10) +
		", handle " + aws.ToString(t.TaskHandle) + ", destination " + aws.ToString(t.DestinationArn) +
		", failure " + aws.ToString(t.FailureReason)
}

func init() { checks = append(checks, moveTaskChecks...) }
