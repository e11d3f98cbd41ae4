// Package testkit is the scaffolding, not the house: the packages beneath
// it serve the repository's tests, benchmarks and the tempq tool, and no
// library package imports them outside its tests. sqstestenv starts the
// servers tests run against (fauxqs or sqstest), faultproxy injects faults
// between a client and a server, sqsenv picks the server a command talks
// to, child runs emulators in child processes, leakcheck finds leaked
// goroutines, testtime moves a testing/synctest bubble's clock and holds the
// one poll-until helper, testbody makes bodies of a given size and kind
// (JSON, log text, base64 of random bytes) for tests of compression, and
// apisurface and modules check the repository itself.
package testkit
