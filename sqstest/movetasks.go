package sqstest

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
	"github.com/tempqueues/tempqueues/sqstest/internal/journal"
)

// Message move tasks (StartMessageMoveTask, ListMessageMoveTasks,
// CancelMessageMoveTask): SQS's own dead-letter queue redrive. A task moves
// the messages a dead-letter queue holds when it starts, to a destination
// queue or, without one, each back to the queue it was dead-lettered from,
// at most MaxNumberOfMessagesPerSecond a second (all at once when unset).
// It moves one second's share at the start and one more each second of the
// server's clock, so a Clock drives it. Tasks live in memory only: a
// restart ends a running task; each message moved before is on disk where
// it went.

// Move task statuses.
const (
	taskRunning    = "RUNNING"
	taskCompleted  = "COMPLETED"
	taskCancelling = "CANCELLING"
	taskCancelled  = "CANCELLED"
	taskFailed     = "FAILED"
)

// maxMoveRate is SQS's limit on MaxNumberOfMessagesPerSecond.
const maxMoveRate = 500

// moveTasksKept is how many finished tasks ListMessageMoveTasks can show
// per source: its MaxResults limit.
const moveTasksKept = 10

type moveTask struct {
	id      string
	source  *queue
	destARN string // empty: each message's original source
	rate    int    // 0: unset
	status  string
	moved   int64
	toMove  int64
	started time.Time
	failure string
	timer   alarm
}

// isClosing reports whether Close has begun.
func (s *Server) isClosing() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (t *moveTask) active() bool { return t.status == taskRunning || t.status == taskCancelling }

// handle encodes the task id and its source's ARN, as SQS's handles do, so
// that CancelMessageMoveTask can tell an unknown task from an unknown queue.
func (t *moveTask) handle() string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.id + "\x00" + t.source.arn))
}

func errResourceNotFound(msg string) *api.Error {
	return api.NewError(http.StatusNotFound, "ResourceNotFoundException", "%s", msg)
}

func errNoSuchARN(param string) *api.Error {
	return errResourceNotFound("The resource that you specified for the " + param + " parameter doesn't exist.")
}

// isDeadLetterQueue reports whether some queue's RedrivePolicy names q.
// Callers hold s.mu.
func (s *Server) isDeadLetterQueue(q *queue) bool {
	for _, src := range s.queues {
		if src.redrive != nil && src.redrive.targetARN == q.arn {
			return true
		}
	}
	return false
}

func (s *Server) startMessageMoveTask(_ context.Context, in *api.StartMoveTaskInput) (*api.StartMoveTaskOutput, error) {
	if in.SourceArn == "" {
		return nil, api.MissingParameter("SourceArn")
	}
	rate := 0
	if in.MaxNumberOfMessagesPerSecond != nil {
		rate = *in.MaxNumberOfMessagesPerSecond
		if rate < 1 || rate > maxMoveRate {
			return nil, api.InvalidParameter("Value %d for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: must be between 1 and %d.", rate, maxMoveRate)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.queueByARN(in.SourceArn)
	if src == nil {
		return nil, errNoSuchARN("SourceArn")
	}
	if !s.isDeadLetterQueue(src) {
		return nil, api.InvalidParameter("Source queue must be configured as a Dead Letter Queue.")
	}
	if in.DestinationArn != "" {
		dst := s.queueByARN(in.DestinationArn)
		if dst == nil {
			return nil, errNoSuchARN("DestinationArn")
		}
		if dst == src {
			return nil, api.InvalidParameter("Source queue and destination queue must be different.")
		}
		if dst.fifo != src.fifo {
			return nil, api.InvalidParameter("Source queue and destination queue must be of the same type.")
		}
	}
	for _, t := range src.moveTasks {
		if t.active() {
			return nil, api.InvalidParameter("There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
		}
	}
	now := s.clock.now()
	t := &moveTask{id: uuid.NewString(), source: src, destARN: in.DestinationArn, rate: rate,
		status: taskRunning, started: now, toMove: int64(s.count(src, now).visible)}
	src.moveTasks = append(src.moveTasks, t)
	if n := len(src.moveTasks); n > moveTasksKept {
		src.moveTasks = append(src.moveTasks[:0], src.moveTasks[n-moveTasksKept:]...)
	}
	s.moveStep(t)
	return &api.StartMoveTaskOutput{TaskHandle: t.handle()}, nil
}

// moveStep moves one second's share of t's messages and schedules the next
// step, or ends t. Callers hold s.mu.
func (s *Server) moveStep(t *moveTask) {
	t.timer = nil
	if t.status == taskCancelling {
		t.status = taskCancelled
		return
	}
	if t.status != taskRunning {
		return
	}
	src := t.source
	if s.queues[src.name] != src {
		t.status, t.failure = taskFailed, api.QueueDoesNotExist().QueryCode
		return
	}
	now := s.clock.now()
	src.promote(now)
	n := int64(t.rate)
	if n == 0 {
		n = t.toMove
	}
	left := false
	for m := src.head; m != nil && t.moved < t.toMove; {
		next := m.next
		switch {
		case src.expired(m, now):
			src.remove(m)
		case !m.visible(now):
		case n == 0:
			left = true
		default:
			dstARN := t.destARN
			if dstARN == "" {
				dstARN = m.dlqSourceARN
			}
			dst := s.queueByARN(dstARN)
			if dst == nil || dst.fifo != src.fifo {
				// Deleted meanwhile, or (without a destination) the message
				// was sent to the dead-letter queue directly.
				t.status, t.failure = taskFailed, api.QueueDoesNotExist().QueryCode
				return
			}
			s.moveMessage(src, dst, m, now)
			t.moved++
			n--
		}
		if left {
			break
		}
		m = next
	}
	if !left || t.moved >= t.toMove {
		t.status = taskCompleted
		return
	}
	t.timer = s.clock.afterFunc(time.Second, func() {
		if s.isClosing() {
			return
		}
		s.mu.Lock()
		if t.timer != nil && !s.isClosing() {
			s.moveStep(t)
		}
		s.mu.Unlock()
		_ = s.durable() // the moves are on disk without waiting for a request
	})
}

// moveMessage moves m from src to the tail of dst as a message never
// received: same id, body and attributes, receive count reset. The
// destination's record is journaled before the source's delete, so that a
// crash between them leaves the message in both queues rather than in
// neither. Callers hold s.mu.
func (s *Server) moveMessage(src, dst *queue, m *message, now time.Time) {
	src.remove(m)
	m.receives, m.firstReceive, m.receivedAt, m.handle = 0, time.Time{}, time.Time{}, ""
	m.visibleAt = now
	m.dlqSourceARN = ""
	if dst.fifo {
		dst.seq++
		m.seqNum = seqString(dst.seq)
	}
	dst.insert(m, now)
	s.journalMessage(dst, m)
	s.journalAdd(&journal.Record{T: "d", Q: src.name, ID: m.id})
	dst.wake(1)
}

func (s *Server) cancelMessageMoveTask(_ context.Context, in *api.CancelMoveTaskInput) (*api.CancelMoveTaskOutput, error) {
	if in.TaskHandle == "" {
		return nil, api.MissingParameter("TaskHandle")
	}
	raw, err := base64.RawURLEncoding.DecodeString(in.TaskHandle)
	id, arn, ok := strings.Cut(string(raw), "\x00")
	if err != nil || !ok || id == "" || !strings.HasPrefix(arn, "arn:") {
		return nil, api.InvalidParameter("Value for parameter TaskHandle is invalid.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.queueByARN(arn)
	if src == nil {
		return nil, errNoSuchARN("SourceArn")
	}
	for _, t := range src.moveTasks {
		if t.id == id && t.status == taskRunning {
			t.status = taskCancelling // the next step ends it
			if t.timer == nil {
				t.status = taskCancelled
			}
			return &api.CancelMoveTaskOutput{ApproximateNumberOfMessagesMoved: t.moved}, nil
		}
	}
	return nil, errResourceNotFound("Task does not exist.")
}

func (s *Server) listMessageMoveTasks(_ context.Context, in *api.ListMoveTasksInput) (*api.ListMoveTasksOutput, error) {
	if in.SourceArn == "" {
		return nil, api.MissingParameter("SourceArn")
	}
	limit := 1
	if in.MaxResults != nil {
		limit = *in.MaxResults
		if limit < 1 || limit > moveTasksKept {
			return nil, api.InvalidParameter("Value %d for parameter MaxResults is invalid. Reason: must be between 1 and %d.", limit, moveTasksKept)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.queueByARN(in.SourceArn)
	if src == nil {
		return nil, errNoSuchARN("SourceArn")
	}
	out := &api.ListMoveTasksOutput{Results: []api.MoveTaskEntry{}}
	for i := len(src.moveTasks) - 1; i >= 0 && len(out.Results) < limit; i-- {
		t := src.moveTasks[i]
		e := api.MoveTaskEntry{Status: t.status, SourceArn: src.arn, DestinationArn: t.destARN,
			ApproximateNumberOfMessagesMoved: t.moved, ApproximateNumberOfMessagesToMove: &t.toMove,
			FailureReason: t.failure, StartedTimestamp: t.started.UnixMilli()}
		if t.rate > 0 {
			e.MaxNumberOfMessagesPerSecond = &t.rate
		}
		if t.status == taskRunning {
			e.TaskHandle = t.handle()
		}
		out.Results = append(out.Results, e)
	}
	return out, nil
}
