// Package reaper deletes the temporary queues that crashed or killed
// processes leave behind, interoperably with AWS's Java Temporary Queue
// Client and at a fraction of its cost.
//
// It has three parts:
//
//   - Heartbeats mark the queues a process owns as alive: the
//     sqsapi.RetentionTag (__IdleQueueRetentionPeriodSeconds, seconds) is
//     written once and the sqsapi.HeartbeatTag
//     (__AmazonSQSIdleQueueDeletingClient.LastHeartbeatTimestamp, epoch
//     milliseconds) is refreshed only when it is older than a third of the
//     retention: 36 TagQueue calls an hour per queue at the default 300 s,
//     where the Java client tags every 5 s (720 an hour). One goroutine
//     serves every queue of the process, with jitter, and backs off with
//     jitter on errors such as throttling; it runs only while a queue is
//     registered.
//
//   - A Sweeper lists the queues under the prefix (all pages), reads each
//     one's tags once and deletes it when idle by the Java client's rule:
//     retention tag present and heartbeat missing or older than the
//     retention. A requester host queue (<prefix><uuid>-<n>) is deleted even
//     when it holds replies nobody can read any more; any other idle queue
//     only when empty. Cost: one ListQueueTags per queue, plus a
//     GetQueueAttributes for idle non-host queues and the DeleteQueue, where
//     the Java sweeper spends about 8 calls per queue. Sweeper.Queues shows
//     the rule's verdict on each queue without deleting anything.
//
//   - A lease makes one process of the fleet sweep per period: a token
//     message in the queue <prefix>sweeper.fifo, taken by the first process
//     polling in each period's window and hidden until the next window
//     (see the comment in internal/reap/lease.go). It needs no renewal, so a dead
//     sweeper is replaced in the next window, and it costs each process one
//     ReceiveMessage per period.
//
// A Reaper does all three for a process: it runs from New to Close, and
// heartbeats the queues added to it.
//
//	r, err := reaper.New(sqsClient)
//	if err != nil { ... }
//	defer r.Close(ctx)
//	r.Add(queueURL, 300*time.Second)
//	...
//	r.Remove(queueURL)                 // then DeleteQueue
//
// A requester (and a tempqueue.Client) runs one of its own; use a Sweeper
// for one-off sweeps, as the tempq command's sweep and queues do.
//
// # Clock skew
//
// The sweeping process compares another process's heartbeat with its own
// clock. Clocks must agree to well within the retention minus the
// heartbeat interval (200 s at the defaults), which NTP-synchronized hosts
// do by orders of magnitude. A heartbeat in the future is taken as skew and
// the queue is kept. The lease windows also come from local clocks; skew up
// to the window length (a tenth of the period, at most 30 s) only moves
// which process sweeps.
//
// # Cost at the defaults (retention 300 s, period 5 minutes)
//
// An idle process with one host queue makes about 60 calls an hour: 36
// TagQueue, 12 ReceiveMessage (lease), and its share of the sweeps, 12 an
// hour in a fleet of any size (one ListQueues per sweep and one
// ListQueueTags per other process's queue, spread over the fleet). A
// sweep makes one call per listed queue (ListQueueTags), two for an idle
// queue that is not a requester host queue (plus GetQueueAttributes), one
// ListQueues per 1,000 queues, and the deletes.
//
// # The account's tagging quota
//
// SQS serves about 30 tagging calls a second per account, heartbeats and
// sweeps together, which bounds the fleet one account can run at a given
// retention (about 1,800 processes at 300 s; docs/capacity.md has the
// table). So a Reaper counts its fleet's queues (one ListQueues, sampled
// by a hex digit past 1,000 queues; internal/reap/fleet.go) when its process tags a new
// queue, then at growing intervals, and its queues keep to the
// smallest multiple of their configured retention that fits that size,
// written in the retention tag before any call is throttled. Sweeps read
// tags at most 10 a second and at most 1,800 queues per 5-minute period: a
// larger fleet is split in shares by a hash of the queue name, one share
// per period. A throttled heartbeat is retried within the retention and
// doubles its queue's retention tag (up to 16 times), the backstop for
// what the count misses; while one in 20 of a sweep's tag reads or more is
// throttled, the sweeper grants a queue whose heartbeat predates the
// throttling up to twice its retention.
//
// # IAM
//
// Heartbeats: sqs:TagQueue (and sqs:TagQueue with sqs:CreateQueue where
// the requester and tempqueue create their host queues with their tags).
// Sweeps, and the fleet
// counts that come with them: sqs:ListQueues,
// sqs:ListQueueTags, sqs:GetQueueAttributes, sqs:DeleteQueue. Lease:
// sqs:CreateQueue, sqs:GetQueueUrl, sqs:ReceiveMessage, sqs:SendMessage,
// sqs:DeleteMessage, sqs:ChangeMessageVisibility, sqs:GetQueueAttributes on
// <prefix>sweeper.fifo.
package reaper
