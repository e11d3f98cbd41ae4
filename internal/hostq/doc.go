// Package hostq is the host-queue core: it owns one real SQS host queue of
// virtual queues in this process, with its pollers, its router, one ordered
// ledger of the messages it received and holds, the scheduler that releases
// held messages before their visibility ends, and the batchers of its
// deletes and visibility changes.
//
// Three kinds of route take messages by their routing attribute
// (sqsapi.VirtualQueueNameAttribute):
//
//   - a Queue buffers messages for receivers (virtualqueue's drop-in
//     virtual queues), expires when idle, and hands each message on at
//     least once: it is deleted only by its consumer;
//   - an expectation (Host.Expect) takes exactly one message for a waiting
//     call (the requester's replies) and hands it to the call directly; the
//     core then deletes it, lingering for company;
//   - a multi-message expectation (Host.ExpectMany) takes every message
//     routed to its name until its callback says the last one came (the
//     requester's reply streams and gathers); each is deleted the same way.
//
// Messages no route takes are orphans, settled by Options.Orphan.
//
// Data flows one way: the pollers receive, the router hands messages to
// expectations, to waiting receivers or to queue buffers (the ledger),
// and the maintenance goroutine releases what nobody took in time.
// Callbacks run outside the host's lock and never call back into it from
// the poller's goroutine.
//
// The Owner (owner.go) is the lifecycle of the host queues a process
// creates for itself: create with the reaper's tags, heartbeat (the tag
// refresh that keeps a host queue from being swept), recreate
// when found deleted, delete on Close. internal/core holds one, with its
// reaper and the clients' sender.
package hostq
