package s3payload_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/s3payload"
)

// lifecycleRule is the rule docs/s3.md gives for a crash's leftovers,
// read from its JSON block.
type lifecycleRule struct {
	Rules []struct {
		ID                             string
		Filter                         struct{ Prefix string }
		Status                         string
		Expiration                     struct{ Days int32 }
		AbortIncompleteMultipartUpload struct{ DaysAfterInitiation int32 }
	}
}

func documentedRule(t *testing.T) lifecycleRule {
	t.Helper()
	doc, err := os.ReadFile("../docs/s3.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/s3.md has no JSON block")
	}
	var rule lifecycleRule
	if err := json.Unmarshal(m[1], &rule); err != nil || len(rule.Rules) != 1 {
		t.Fatalf("docs/s3.md's rule: %v", err)
	}
	return rule
}

// TestCrashLeavesWhatTheRuleRemoves: a request whose responder never
// answers (it crashed, or never ran) leaves its object; the object's key
// carries the caller's deadline, and falls under the documented
// lifecycle rule's prefix, which S3 (fauxqs here) accepts as written.
func TestCrashLeavesWhatTheRuleRemoves(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		sqsClient, _ := b.Client(t)
		s3c, bucket := s3For(t, b)
		store, err := s3payload.New(s3c, bucket)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		qout, err := sqsClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "crash"))})
		if err != nil {
			t.Fatal(err)
		}
		queue := aws.ToString(qout.QueueUrl)
		t.Cleanup(func() { _, _ = sqsClient.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &queue}) })
		r := newRequester(t, sqsClient, store)

		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		deadline, _ := cctx.Deadline()
		_, err = r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: &queue, MessageBody: aws.String(body(2<<20, 4))})
		if !errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("%v, want a timeout: no responder runs", err)
		}
		left := objects(t, s3c, bucket)
		if len(left) != 1 {
			t.Fatalf("left in the bucket: %v, want the request's object", left)
		}
		parts := strings.Split(left[0], "/")
		if len(parts) != 3 || parts[0] != "tempqueues" {
			t.Fatalf("key %q, want tempqueues/DEADLINE/UUID", left[0])
		}
		if d, err := strconv.ParseInt(parts[1], 10, 64); err != nil || d != deadline.Unix() {
			t.Errorf("key %q carries deadline %s, want the caller's, %d", left[0], parts[1], deadline.Unix())
		}

		rule := documentedRule(t).Rules[0]
		if !strings.HasPrefix(left[0], rule.Filter.Prefix) || rule.Status != "Enabled" || rule.Expiration.Days != 1 {
			t.Errorf("the documented rule %+v does not expire %q after a day", rule, left[0])
		}
		if b.Name != "fauxqs" {
			return // gofakes3 keeps no lifecycle configuration
		}
		_, err = s3c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
			Bucket: &bucket,
			LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: []s3types.LifecycleRule{{
				ID:                             aws.String(rule.ID),
				Filter:                         &s3types.LifecycleRuleFilter{Prefix: aws.String(rule.Filter.Prefix)},
				Status:                         s3types.ExpirationStatus(rule.Status),
				Expiration:                     &s3types.LifecycleExpiration{Days: aws.Int32(rule.Expiration.Days)},
				AbortIncompleteMultipartUpload: &s3types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(rule.AbortIncompleteMultipartUpload.DaysAfterInitiation)},
			}}},
		})
		if err != nil {
			t.Fatalf("the documented rule is refused: %v", err)
		}
		got, err := s3c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &bucket})
		if err != nil || len(got.Rules) != 1 || aws.ToString(got.Rules[0].Filter.Prefix) != "tempqueues/" {
			t.Errorf("lifecycle read back: %+v, %v", got, err)
		}
	})
}
