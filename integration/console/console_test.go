package console

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/chromedp/chromedp"
)

// rowCell is a JavaScript expression for a cell of a queue's row in the
// queue list ("" when the row is missing).
func rowCell(queue, class string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-queue=%q] .%s') || {}).textContent`, queue, class)
}

// sendForm fills the send form with a body and one message attribute, and
// submits it.
func sendForm(body, attr, typ, value string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.SetValue(chromedp.ID("send-body"), body),
		chromedp.SetValue(chromedp.ID("attr-name-0"), attr),
		chromedp.SetValue(chromedp.ID("attr-type-0"), typ),
		chromedp.SetValue(chromedp.ID("attr-value-0"), value),
		chromedp.Click(chromedp.ID("send")),
	}
}

// queueAttrs returns a queue's attributes through the SDK.
func queueAttrs(ctx context.Context, c *sqs.Client, url string) (map[string]string, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		return nil, err
	}
	return out.Attributes, nil
}

func createQueue(t *testing.T, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

func send(t *testing.T, c *sqs.Client, url, body string) {
	t.Helper()
	if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleInBrowser drives the emulator's console in headless
// Chromium, with the SDK on the other side: queues appear and counts move
// without a reload, a message sent from the form is received through the
// SDK, bad input changes nothing, purge empties, a move task runs to
// completion; and no page logs an error.
func TestConsoleInBrowser(t *testing.T) {
	em := startEmulator(t)
	b := newBrowser(t)
	ctx := context.Background()
	c := em.Client
	ui := em.URL + "/ui/"

	b.do(t, "open the queue list", chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.ID("queue-rows")))
	// A mark that a reload would wipe.
	eval[bool](t, b, `window.noReload = true`)

	// Queues made through the SDK appear without a reload.
	dlq := createQueue(t, c, "orders-dlq", nil)
	dlqAttrs, err := queueAttrs(ctx, c, dlq)
	if err != nil {
		t.Fatal(err)
	}
	orders := createQueue(t, c, "orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqAttrs["QueueArn"] + `","maxReceiveCount":"3"}`,
	})
	b.waitJS(t, "the new queues in the list", rowCell("orders", "visible")+` === "0" && `+rowCell("orders-dlq", "visible")+` === "0"`)
	b.waitJS(t, "the dead-letter link", `document.querySelector('tr[data-queue="orders-dlq"]').textContent.includes("DLQ of orders")`)

	// Counts follow sends and receives.
	for i := range 3 {
		send(t, c, orders, "order "+strconv.Itoa(i))
	}
	b.waitJS(t, "3 visible", rowCell("orders", "visible")+` === "3"`)
	if _, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(orders), MaxNumberOfMessages: 1, VisibilityTimeout: 600}); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "2 visible, 1 in flight", rowCell("orders", "visible")+` === "2" && `+rowCell("orders", "inflight")+` === "1"`)
	if !eval[bool](t, b, `window.noReload === true`) {
		t.Fatal("the page reloaded")
	}

	// The queue page: the peek shows the messages, emulator only.
	b.do(t, "open the orders page", chromedp.Click(chromedp.CSS(`tr[data-queue="orders"] a`)), chromedp.WaitVisible(chromedp.ID("send-form")))
	b.waitJS(t, "the peek", `document.querySelectorAll("#peek tr.message").length === 3 && document.querySelector("#peek").textContent.includes("order 2")`)

	// Bad input: the API's error, and nothing sent.
	b.do(t, "send a bad Number attribute", sendForm("bad", "n", "Number", "abc")...)
	b.waitJS(t, "the API's error", `(document.getElementById("error") || {}).textContent?.startsWith("InvalidParameterValue")`)
	if a, err := queueAttrs(ctx, c, orders); err != nil || a["ApproximateNumberOfMessages"] != "2" {
		t.Fatalf("after bad input: attributes %v, %v; want 2 visible still", a, err)
	}
	if v := eval[string](t, b, `document.getElementById("send-body").value`); v != "bad" {
		t.Fatalf("the form lost its body: %q", v)
	}

	// Send from the form, receive through the SDK.
	b.do(t, "send from the form", sendForm("hello from the browser", "origin", "String", "console")...)
	b.waitJS(t, "the sent notice", `(document.getElementById("notice") || {}).textContent?.startsWith("Sent message")`)
	var got *types.Message
	waitFor(t, "the form's message through the SDK", func() (bool, error) {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(orders), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}, VisibilityTimeout: 600})
		if err != nil {
			return false, err
		}
		for _, m := range out.Messages {
			if aws.ToString(m.Body) == "hello from the browser" {
				got = &m
				return true, nil
			}
		}
		return false, fmt.Errorf("received %d other messages", len(out.Messages))
	})
	if v := aws.ToString(got.MessageAttributes["origin"].StringValue); v != "console" {
		t.Fatalf("the form's attribute origin = %q, want console", v)
	}
	b.waitJS(t, "the live counts after the receives", `document.getElementById("count-visible").textContent === "0" && document.getElementById("count-inflight").textContent === "4"`)

	// Purge.
	send(t, c, orders, "to purge")
	b.waitJS(t, "1 visible before the purge", `document.getElementById("count-visible").textContent === "1"`)
	b.do(t, "purge", chromedp.Click(chromedp.ID("purge-confirm")), chromedp.Click(chromedp.ID("purge")))
	b.waitJS(t, "the purged notice", `(document.getElementById("notice") || {}).textContent?.startsWith("Purged")`)
	waitFor(t, "an empty queue through the SDK", func() (bool, error) {
		a, err := queueAttrs(ctx, c, orders)
		return err == nil && a["ApproximateNumberOfMessages"] == "0" && a["ApproximateNumberOfMessagesNotVisible"] == "0", fmt.Errorf("attributes %v, %v", a, err)
	})
	b.waitJS(t, "zero counts on the page", `document.getElementById("count-visible").textContent === "0" && document.getElementById("count-inflight").textContent === "0"`)

	// A move task from the dead-letter queue back to its source: five
	// messages that failed in payments (one receive allowed, visible again
	// at once) first.
	payments := createQueue(t, c, "payments", map[string]string{
		"RedrivePolicy":     `{"deadLetterTargetArn":"` + dlqAttrs["QueueArn"] + `","maxReceiveCount":"1"}`,
		"VisibilityTimeout": "0",
	})
	for i := range 5 {
		send(t, c, payments, "payment "+strconv.Itoa(i))
	}
	waitFor(t, "five dead letters", func() (bool, error) {
		// Each receive hides nothing: the next one dead-letters what
		// this one received.
		if _, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(payments), MaxNumberOfMessages: 10}); err != nil {
			return false, err
		}
		a, err := queueAttrs(ctx, c, dlq)
		return err == nil && a["ApproximateNumberOfMessages"] == "5", fmt.Errorf("DLQ attributes %v, %v", a, err)
	})
	b.do(t, "open the dead-letter queue", chromedp.Navigate(ui+"queue?url="+dlq), chromedp.WaitVisible(chromedp.ID("move-form")))
	b.waitJS(t, "5 messages in the DLQ", `document.getElementById("count-visible").textContent === "5"`)
	b.do(t, "start the move task", chromedp.Click(chromedp.ID("move")))
	b.waitJS(t, "the started notice", `(document.getElementById("notice") || {}).textContent?.startsWith("Started message move task")`)
	b.waitJS(t, "the task completed", `Array.from(document.querySelectorAll("#tasks tr.task .status")).some(e => e.textContent === "COMPLETED") && document.querySelector("#tasks tr.task .moved").textContent === "5"`)
	b.waitJS(t, "an empty DLQ", `document.getElementById("count-visible").textContent === "0"`)
	waitFor(t, "the messages back in payments", func() (bool, error) {
		a, err := queueAttrs(ctx, c, payments)
		return err == nil && a["ApproximateNumberOfMessages"] == "5", fmt.Errorf("attributes %v, %v", a, err)
	})

	// The calls page charts the calls, the console's own left out.
	b.do(t, "open the calls page", chromedp.Navigate(ui+"calls"), chromedp.WaitVisible(chromedp.ID("chart")))
	b.waitJS(t, "the SendMessage row", `(document.querySelector('#call-rows tr[data-op="SendMessage"] .total') || {}).textContent === "9"`)
	for i := range 20 {
		send(t, c, orders, "burst "+strconv.Itoa(i))
	}
	b.waitJS(t, "a rate on the chart", `document.querySelectorAll("#chart polyline").length > 0 && Number(document.getElementById("rate-total").textContent) > 0`)
	if eval[bool](t, b, `document.querySelector('#call-rows tr[data-op="ListQueueTags"]') !== null`) {
		t.Error("the calls page counts the console's own ListQueueTags")
	}

	// Deleting a queue from its page.
	b.do(t, "delete orders-dlq", chromedp.Navigate(ui+"queue?url="+dlq), chromedp.WaitVisible(chromedp.ID("delete-form")),
		chromedp.Click(chromedp.ID("delete-confirm")), chromedp.Click(chromedp.ID("delete")))
	b.waitJS(t, "the deleted notice and the list without it", `(document.getElementById("notice") || {}).textContent === "Deleted queue orders-dlq." && !document.querySelector('tr[data-queue="orders-dlq"]')`)
	if _, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders-dlq")}); err == nil {
		t.Fatal("orders-dlq still exists")
	}
}

// TestTemporaryQueuesInBrowser: a live and a due host queue, their owner
// and the sweeper lease held by a process, as the temporary page shows
// them, live.
func TestTemporaryQueuesInBrowser(t *testing.T) {
	em := startEmulator(t)
	b := newBrowser(t)
	c := em.Client
	scene := newFleetScene(t, c)
	b.do(t, "open the temporary page", chromedp.Navigate(em.URL+"/ui/temporary"), chromedp.WaitVisible(chromedp.ID("lease")))
	b.waitJS(t, "the live queue", fmt.Sprintf(`(document.querySelector('tr[data-queue=%q] .verdict') || {}).textContent === "live"`, scene.live))
	b.waitJS(t, "the due queue", fmt.Sprintf(`(document.querySelector('tr[data-queue=%q] .verdict') || {}).textContent === "due"`, scene.due))
	b.waitJS(t, "the owner", fmt.Sprintf(`document.querySelector('tr[data-queue=%q]').textContent.includes(%q)`, scene.live, scene.owner))
	b.waitJS(t, "the lease holder", `document.getElementById("lease-holder").textContent.startsWith("held by a process")`)
	b.waitJS(t, "a bar per queue", `document.querySelectorAll("meter").length === 2`)
	share := eval[float64](t, b, fmt.Sprintf(`Number(document.querySelector('tr[data-queue=%q] meter').value)`, scene.due))
	if share < 1 {
		t.Fatalf("the due queue's bar is at %v of its retention, want past 1", share)
	}
	// A new host queue appears without a reload.
	eval[bool](t, b, `window.noReload = true`)
	another := createQueue(t, c, scene.prefix+"99999999-9999-4999-8999-999999999999-0", nil)
	tagHeartbeat(t, c, another, time.Now())
	b.waitJS(t, "the new host queue, live", `(document.querySelector('tr[data-queue="`+scene.prefix+`99999999-9999-4999-8999-999999999999-0"] .verdict') || {}).textContent === "live" && window.noReload === true`)
}
