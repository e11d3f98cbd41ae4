// Package integration holds the end-to-end tests of tempqueues: requesters
// and responders, in one process and in several, against real SQS-compatible
// servers (fauxqs and sqstest, or AWS when TEMPQUEUES_TEST_AWS=1), including
// Java wire-format interop, crashes, graceful shutdown, and throttling, 500s
// and dropped responses injected by internal/testkit/faultproxy. It has no
// library code.
package integration
