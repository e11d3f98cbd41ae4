package console

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/chromedp/chromedp"
)

var update = flag.Bool("update", false, "write the screenshots to docs/console/")

// screenshotDir is where docs/console.md finds the screenshots.
var screenshotDir = filepath.Join("..", "..", "docs", "console")

// TestConsoleScreenshots takes a screenshot of each page of the console
// over a small scene (queues with a dead-letter queue, a FIFO queue, a
// fleet's host queues and lease, and steady traffic), checks each one,
// and with -update writes them for docs/console.md:
//
//	cd integration/console && go test -run TestConsoleScreenshots -update
func TestConsoleScreenshots(t *testing.T) {
	em := startEmulator(t)
	b := newBrowser(t)
	c := em.Client
	ctx := context.Background()
	ui := em.URL + "/ui/"

	dlq := createQueue(t, c, "orders-dlq", nil)
	dlqAttrs, err := queueAttrs(ctx, c, dlq)
	if err != nil {
		t.Fatal(err)
	}
	orders := createQueue(t, c, "orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqAttrs["QueueArn"] + `","maxReceiveCount":"5"}`,
	})
	if _, err := c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(orders), Tags: map[string]string{"team": "checkout", "env": "dev"}}); err != nil {
		t.Fatal(err)
	}
	events := createQueue(t, c, "events.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	for i := range 4 {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(events), MessageBody: aws.String(`{"event":"signup","n":` + strconv.Itoa(i) + `}`), MessageGroupId: aws.String("users")}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(orders), MessageBody: aws.String(fmt.Sprintf(`{"order":%d,"sku":"A-%03d","qty":%d}`, 1000+i, 17*i, 1+i%3)),
			MessageAttributes: map[string]types.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(orders), MaxNumberOfMessages: 2, VisibilityTimeout: 600}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		send(t, c, dlq, fmt.Sprintf(`{"order":%d,"error":"payment declined"}`, 990+i))
	}
	newFleetScene(t, c)

	// Steady traffic for the calls chart, stopped before the test ends.
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		traffic(trafficCtx, c, createQueue(t, c, "work", nil))
	}()
	defer func() {
		stopTraffic()
		wg.Wait()
	}()

	shots := []struct {
		name, path, ready string
	}{
		{"queues", "", `document.querySelectorAll("#queue-rows tr[data-queue]").length >= 6`},
		{"queue", "queue?url=" + orders, `document.querySelectorAll("#peek tr.message").length === 6`},
		{"temporary", "temporary", `document.querySelectorAll("meter").length === 2 && document.getElementById("lease-holder")`},
		// Twenty seconds of rates on the chart.
		{"calls", "calls", `(document.querySelector("#chart polyline")?.getAttribute("points") || "").split(" ").length >= 20`},
	}
	for _, s := range shots {
		b.do(t, "open "+s.name, chromedp.Navigate(ui+s.path))
		b.waitJS(t, s.name+" ready", s.ready)
		shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG
		if err != nil {
			t.Fatalf("screenshot of %s: %v", s.name, err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatalf("screenshot of %s is not a PNG: %v", s.name, err)
		}
		if w := img.Bounds().Dx(); w != 1280 {
			t.Fatalf("screenshot of %s is %d pixels wide, want 1280", s.name, w)
		}
		if *update {
			if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(screenshotDir, s.name+".png"), shot, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// traffic sends, receives and deletes on a queue, a few calls a second of
// each, until ctx ends.
func traffic(ctx context.Context, c *sqs.Client, queue string) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_, _ = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String("job " + strconv.Itoa(n))})
		if n%2 == 1 {
			continue
		}
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10})
		if err != nil {
			continue
		}
		for _, m := range out.Messages {
			_, _ = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queue), ReceiptHandle: m.ReceiptHandle})
		}
	}
}
