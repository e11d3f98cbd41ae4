//go:build !linux

package redisstore_test

import "syscall"

// sysProcAttr: elsewhere than on Linux a child outlives a test binary that
// is killed; the cleanup of a test that ends normally still stops it.
func sysProcAttr() *syscall.SysProcAttr { return nil }
