// Package console holds the browser tests of tempq's web console: Go tests
// that drive headless Chromium (Debian's chromium package) through the
// console of a tempq emulator, and that make the screenshots of
// docs/console.md (go test -run TestConsoleScreenshots -update).
//
// It is a module of its own so that the core module does not depend on
// the browser driver. `make console` installs Chromium and runs the tests.
package console
