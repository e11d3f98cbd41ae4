package sqshttp

import (
	"context"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/tempqueues/tempqueues/requester"
)

// partSize is the most bytes of a body one part carries: its message
// holds them in base64 at worst, after the encoding mark.
const partSize = (maxEnvelope - 1) / 4 * 3

// firstRead is the buffer an upload starts reading with. It doubles, up
// to partSize, each time a Read fills it: a body read fast (a file) goes
// in few large parts, and one written slowly (a pipe) holds little memory.
const firstRead = 64 << 10

// upload streams a request body to its handler, each Read a part (a
// message of the request's session), from a goroutine of its own: the body
// may block (a pipe its caller writes while it reads the response).
type upload struct {
	body   io.ReadCloser
	length int64 // what the request declared, -1 when unknown

	closeOnce sync.Once
	mu        sync.Mutex
	stopped   bool  // the exchange ended: the body's later errors are ours
	err       error // the body failed first: why the session was closed
}

// start streams the body on s, under ctx. A nil upload does nothing.
func (u *upload) start(ctx context.Context, s *requester.Session) {
	if u != nil {
		go u.run(ctx, s)
	}
}

func (u *upload) run(ctx context.Context, s *requester.Session) {
	defer u.closeBody()
	done, err := u.copy(ctx, s)
	switch {
	case err != nil:
		u.mu.Lock()
		fail := !u.stopped
		if fail {
			u.err = err
		}
		u.mu.Unlock()
		if fail {
			// A body cut short must not pass for a whole one: the
			// handler is stopped, and the caller gets err.
			s.Close()
		}
	case done:
		_ = s.CloseSend() // the handler's next Read returns io.EOF
	}
}

// copy sends the body's parts until its end (done) or until the session
// ends first (the handler returned, or the exchange failed, which the
// response reports); err is the body's own failure.
func (u *upload) copy(ctx context.Context, s *requester.Session) (done bool, err error) {
	buf := make([]byte, firstRead)
	var sent int64
	have := 0 // read, not sent
	for {
		n, rerr := u.body.Read(buf[have:])
		filled := have+n == len(buf)
		have += n
		if rerr != nil && rerr != io.EOF {
			return false, fmt.Errorf("reading the request body: %w", rerr)
		}
		cut := have
		if rerr == nil {
			cut = textCut(buf[:have])
		}
		if cut > 0 {
			if sent += int64(cut); u.length >= 0 && sent > u.length {
				return false, bodyLengthError(u.length, sent)
			}
			if err := s.Send(ctx, &requester.Message{Body: string(appendPart(nil, buf[:cut]))}); err != nil {
				return false, nil
			}
			have = copy(buf, buf[cut:have])
		}
		if rerr == io.EOF {
			if u.length >= 0 && sent != u.length {
				return false, bodyLengthError(u.length, sent)
			}
			return true, nil
		}
		if filled && len(buf) < partSize {
			grown := make([]byte, min(2*len(buf), partSize))
			have = copy(grown, buf[:have])
			buf = grown
		}
	}
}

// textCut returns how many of b's bytes, read from a body that goes on,
// to send now: all of them, unless b is text but for a UTF-8 sequence cut
// short at its end, which waits for the next read so that the part
// travels as text rather than in base64.
func textCut(b []byte) int {
	for i := len(b) - 1; i >= 0 && i > len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) && isText(string(b[:i])) {
				return i
			}
			break
		}
	}
	return len(b)
}

// stop ends the upload, if it still runs, by closing the body (a Read
// blocked in it returns), and returns the body's failure, if it failed
// first. A nil upload returns nil.
func (u *upload) stop() error {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	u.stopped = true
	err := u.err
	u.mu.Unlock()
	u.closeBody()
	return err
}

// closeBody closes the body once: at the upload's end, or at stop.
func (u *upload) closeBody() { u.closeOnce.Do(func() { _ = u.body.Close() }) }
