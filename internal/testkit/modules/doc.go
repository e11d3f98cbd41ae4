// Package modules holds the checks that keep the repository's modules
// installable by others: licensed, requiring released versions of the
// core module, built on its public API only, with package names that do
// not clash with the imports their users also need. See docs/versioning.md.
package modules
