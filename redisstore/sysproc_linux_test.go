package redisstore_test

import "syscall"

// sysProcAttr makes the kernel kill a child process when the test binary
// dies, however it dies: the tests never leave servers or responders
// behind. (Pdeathsig fires when the thread that started the child exits;
// Go keeps its threads unless a goroutine locked to one exits, which these
// tests never do.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
