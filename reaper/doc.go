// Package reaper deletes the temporary queues that crashed or killed
// processes leave behind, interoperably with AWS's Java Temporary Queue
// Client and at a fraction of its cost.
//
// It has three parts:
//
//   - A Heartbeater marks the queues a process owns as alive: it writes the
//     RetentionTag (__IdleQueueRetentionPeriodSeconds, seconds) once and
//     refreshes the HeartbeatTag
//     (__AmazonSQSIdleQueueDeletingClient.LastHeartbeatTimestamp, epoch
//     milliseconds) only when it is older than a fraction of the retention:
//     36 TagQueue calls an hour per queue at the default 300 s and 1/3,
//     where the Java client tags every 5 s (720 an hour). One goroutine
//     serves every queue of the process, with jitter, and backs off with
//     jitter on errors such as throttling.
//
//   - A Sweeper lists the queues under the prefix (all pages), reads each
//     one's tags once and deletes it when idle by the Java client's rule:
//     retention tag present and heartbeat missing or older than the
//     retention. A requester host queue (<prefix><uuid>-<n>) is deleted even
//     when it holds replies nobody can read any more; any other idle queue
//     only when empty. Cost: one ListQueueTags per queue, plus a
//     GetQueueAttributes for idle non-host queues and the DeleteQueue, where
//     the Java sweeper spends about 8 calls per queue.
//
//   - A lease makes one process of the fleet sweep per period: a token
//     message in the queue <prefix>sweeper.fifo, taken by the first process
//     polling in each period's window and hidden until the next window
//     (see the comment in lease.go). It needs no renewal, so a dead
//     sweeper is replaced in the next window, and it costs each process one
//     ReceiveMessage per period.
//
// A Reaper combines the three; a requester runs one per process:
//
//	r, err := reaper.New(sqsClient)
//	if err != nil { ... }
//	r.Start()                          // or go r.Run(ctx)
//	defer r.Close(ctx)
//	r.Add(hostQueueURL, 300*time.Second)
//	...
//	r.Remove(hostQueueURL)             // then DeleteQueue
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
// # IAM
//
// Heartbeats: sqs:TagQueue (and sqs:TagQueue with sqs:CreateQueue when
// creating queues with QueueTags). Sweeps: sqs:ListQueues,
// sqs:ListQueueTags, sqs:GetQueueAttributes, sqs:DeleteQueue. Lease:
// sqs:CreateQueue, sqs:GetQueueUrl, sqs:ReceiveMessage, sqs:SendMessage,
// sqs:DeleteMessage, sqs:ChangeMessageVisibility, sqs:GetQueueAttributes on
// <prefix>sweeper.fifo.
package reaper
