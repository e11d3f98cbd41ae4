// Package child starts helper servers (emulators) in child processes that
// cannot outlive the process that started them.
package child

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Start starts cmd with its standard input and output on pipes and waits up
// to timeout for an output line that contains marker; it returns what
// follows marker on that line, trimmed, and the standard input pipe.
//
// The child must exit when its standard input closes: then closing stdin
// stops it, and so does the end of this process, however it ends. The rest
// of its output is read and dropped until it exits. If no such line comes,
// or the child's output ends first, the child is killed and Start fails.
func Start(cmd *exec.Cmd, marker string, timeout time.Duration) (value string, stdin io.WriteCloser, err error) {
	stdin, err = cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, after, ok := strings.Cut(sc.Text(), marker); ok {
				found <- strings.TrimSpace(after)
				break
			}
		}
		close(found)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case v, ok := <-found:
		if ok {
			return v, stdin, nil
		}
		err = fmt.Errorf("%s ended its output without a line containing %q", cmd.Path, marker)
	case <-time.After(timeout):
		err = fmt.Errorf("%s printed no line containing %q within %v", cmd.Path, marker, timeout)
	}
	_ = cmd.Process.Kill()
	_ = stdin.Close()
	_ = cmd.Wait()
	return "", nil, err
}
