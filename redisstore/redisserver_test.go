package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server child process on 127.0.0.1 that lives as
// long as the test that started it.
type redisServer struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, after done
}

// startRedis starts a private redis-server on a free port, with no
// persistence, in a temporary directory, and waits until it answers PING.
// It stops the server when the test ends; should the test binary die
// instead, the kernel kills the server (see sysProcAttr). Without
// redis-server on PATH the test is skipped, or fails when CI=true.
func startRedis(tb testing.TB) *redisServer {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not installed (Debian package redis-server; `make test` installs it)"
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	dir := tb.TempDir()
	var lastErr error
	// A free port found by listening can be taken by someone else before
	// redis binds it: try a few.
	for range 5 {
		srv, err := launchRedis(bin, dir)
		if err == nil {
			tb.Cleanup(srv.stop)
			return srv
		}
		lastErr = err
	}
	tb.Fatalf("starting redis-server: %v", lastErr)
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func launchRedis(bin, dir string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log")
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", dir, "--logfile", logFile,
		// Bounded: a test never needs more.
		"--maxclients", "200", "--maxmemory", "256mb")
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	srv := &redisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
	go func() {
		srv.err = cmd.Wait()
		close(srv.done)
	}()

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return srv, nil
		}
		select {
		case <-srv.done:
			log, _ := os.ReadFile(logFile)
			return nil, fmt.Errorf("redis-server exited (%v): %s", srv.err, log)
		default:
		}
		if time.Now().After(deadline) {
			srv.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer PING: %w", srv.Addr, err)
		}
		time.Sleep(20 * time.Millisecond) // real: redis-server is a child process
	}
}

// stop asks the server to exit, and kills it if it has not within 5 s.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// client returns a client of the server, closed when the test ends.
func (s *redisServer) client(tb testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() {
		if err := rdb.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			tb.Errorf("closing redis client: %v", err)
		}
	})
	return rdb
}
