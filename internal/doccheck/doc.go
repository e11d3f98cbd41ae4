// Package doccheck holds no code, only a test: every Go snippet in
// README.md, CONTRIBUTING.md and docs/*.md compiles, against this tree and
// its nested modules. The conventions a snippet follows are in its test
// (and in CONTRIBUTING.md).
package doccheck
