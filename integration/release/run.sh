#!/usr/bin/env bash
# The release check: publication simulated with no network at all. A
# clone of the committed tree gets the tags of the version
# at the top of CHANGELOG.md (docs/versioning.md; "(unreleased)" after it
# or not) and is served as
# github.com/tempqueues/tempqueues through git's url.<clone>.insteadOf,
# with GOPRIVATE, so that the go command fetches it as it would fetch the
# published repository. A fresh module then runs `go get` on the core and
# on every nested module, `go install`s cmd/tempq, builds a program that
# imports all of them (app.go.txt) and runs it against the installed
# `tempq emulator`; a second fresh module that imports only redisstore
# must `go mod tidy`. Last, apidiff compares each module with the
# previous release and fails on an incompatible change that the
# CHANGELOG's section of this version does not name. The previous
# release is RELEASE_PREVIOUS, else the newest older v* tag, else the
# commit named by the section's "API baseline: <commit>" line: a commit
# of the history, so that the check depends on no tag of the published
# repository (the tags it makes exist only in the clone).
#
# Offline: our modules come from the clone (git insteadOf, GOPRIVATE,
# GIT_ALLOW_PROTOCOL=file), every other module from this machine's module
# cache only (GOPROXY=file://, GOSUMDB=off; their checksums are the
# repository's go.sum lines, seeded into each fresh module), and HTTP(S)
# proxies point at a closed port, so any attempt to reach the network
# fails the check. `make release-deps` fills the module cache first, over
# the network (go mod download in each module, and apidiff's install).
# `make test` runs both.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/integration/release"
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
step() { printf '== %s\n' "$*"; }
fail() { printf 'release: %s\n' "$*" >&2; exit 1; }
# bounded runs each command with a time limit, so that a hung fetch
# cannot stall CI.
bounded() { timeout 300 "$@"; }
# quiet runs a bounded go command whose output goes to a log, shown when
# it fails.
quiet() {
	if ! timeout 300 "$@" >"$work/cmd.log" 2>&1; then
		tail -40 "$work/cmd.log" >&2
		return 1
	fi
}

mod=github.com/tempqueues/tempqueues
nested=(redisstore oteltempq lambdatempq sqsgrpc s3payload)
# The heading is "## vX.Y.Z", or "## vX.Y.Z (unreleased)" until the tags
# are pushed: the check simulates publishing it either way.
heading=$(grep -m1 '^## v' "$root/CHANGELOG.md" || true)
version=$(sed -n 's/^## \(v[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)\( (unreleased)\)\{0,1\}$/\1/p' <<<"$heading")
[ -n "$version" ] || fail "CHANGELOG.md's first version heading is ${heading:-missing}, want '## vX.Y.Z' or '## vX.Y.Z (unreleased)'"

step "clone and tag $version (in the clone only)"
git clone -q "$root" "$work/repo"
clone="$work/repo"
head=$(git -C "$clone" rev-parse HEAD)
for m in "${nested[@]}"; do
	[ -f "$clone/$m/go.mod" ] || fail "$m/go.mod is not committed"
	got=$(sed -n "s#^[[:space:]]*$mod \(v[^[:space:]]*\).*#\1#p" "$clone/$m/go.mod" | head -1)
	[ "$got" = "$version" ] || fail "$m/go.mod requires $mod ${got:-nothing}, want $version"
done
section=$(awk -v h="$heading" '$0 == h {on=1; next} on && /^## v/ {exit} on' "$clone/CHANGELOG.md")
previous=${RELEASE_PREVIOUS:-}
if [ -z "$previous" ]; then
	previous=$(git -C "$clone" tag --list 'v*' --merged "$head" --sort=-v:refname | grep -vx "$version" | head -1 || true)
fi
if [ -z "$previous" ]; then
	previous=$(sed -n 's/^API baseline: `\{0,1\}\([0-9a-f]\{7,40\}\)`\{0,1\}.*/\1/p' <<<"$section" | head -1)
	[ -z "$previous" ] || git -C "$clone" merge-base --is-ancestor "$previous" "$head" ||
		fail "the API baseline $previous of $version is not a commit of this history"
fi
for t in "$version" "${nested[@]/%//$version}"; do
	git -C "$clone" tag -f "$t" "$head" >/dev/null
done

# The go command's view: our modules come from the clone, as if pushed;
# every other module from this machine's module cache, and nothing from
# the network. A module cache of its own, so that the simulated release
# never lands in the machine's cache as if it were the published one.
cache="$(go env GOMODCACHE)/cache/download"
apidiff=golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4
[ -f "$cache/golang.org/x/exp/@v/${apidiff##*@}.zip" ] ||
	fail "the module cache lacks apidiff's module; run 'make release-deps' (network) first"
export HOME="$work/home" GOPATH="$work/gopath" GOMODCACHE="$work/gopath/pkg/mod"
export GOCACHE="$(go env GOCACHE)" GOTOOLCHAIN=local GOENV=off
export GOPROXY="file://$cache" GOSUMDB=off GONOSUMDB="$mod" GOPRIVATE="$mod,$mod/*"
export GOFLAGS=-mod=mod GIT_TERMINAL_PROMPT=0 GIT_ALLOW_PROTOCOL=file
export HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY=127.0.0.1,localhost
export http_proxy=$HTTP_PROXY https_proxy=$HTTPS_PROXY no_proxy=$NO_PROXY
mkdir -p "$HOME"
git config --global url."$clone".insteadOf "https://$mod"
git config --global protocol.file.allow always
# go.sum entries of the modules' own dependencies, so that no checksum
# is looked up that this repository already pins.
sums() { cat "$root"/go.sum "$root"/*/go.sum | sort -u; }

step "go get each module @$version in a fresh module"
app="$work/app"
mkdir -p "$app"
cd "$app"
quiet go mod init example.com/app
sums >go.sum
quiet go get "$mod@$version" || fail "go get $mod@$version"
for m in "${nested[@]}"; do
	quiet go get "$mod/$m@$version" || fail "go get $mod/$m@$version"
done
for m in "" "${nested[@]/#//}"; do
	grep -Eq "^(require)?[[:space:]]*$mod$m $version( |\$)" go.mod || fail "go.mod does not require $mod$m $version: $(cat go.mod)"
done

step "go install $mod/cmd/tempq@$version"
GOBIN="$work/bin" quiet go install "$mod/cmd/tempq@$version" || fail "go install tempq"

step "a program importing every module, against tempq emulator"
cp "$here/app.go.txt" main.go
quiet go build -o "$work/bin/app" . || fail "the program does not build"
mkfifo "$work/emulator.out"
"$work/bin/tempq" emulator --addr 127.0.0.1:0 >"$work/emulator.out" 2>"$work/emulator.err" &
pids+=($!)
exec 3<"$work/emulator.out"
read -r -t 30 line <&3 || fail "tempq emulator printed nothing: $(cat "$work/emulator.err")"
endpoint=${line##* }
case $endpoint in http://127.0.0.1:*) ;; *) fail "tempq emulator printed $(printf %q "$line")" ;; esac
out=$(AWS_ENDPOINT_URL_SQS=$endpoint timeout 120 "$work/bin/app") || fail "the program failed: $out"
want=$'served: hello, alice\ngrpc: SERVING\nlambda: hello, bob'
[ "$out" = "$want" ] || fail "the program printed $(printf %q "$out"), want $(printf %q "$want")"

step "go mod tidy in a module importing only redisstore"
only="$work/only"
mkdir -p "$only"
cd "$only"
quiet go mod init example.com/only
sums >go.sum
cat >main.go <<'GO'
package main

import (
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/tempqueues/tempqueues/redisstore"
)

func main() {
	_, err := redisstore.New(redis.NewClient(&redis.Options{}))
	fmt.Println(err)
}
GO
quiet go get "$mod/redisstore@$version" || fail "go get redisstore"
quiet go mod tidy || fail "go mod tidy with redisstore alone"
quiet go build ./... || fail "build with redisstore alone"

if [ -z "$previous" ]; then
	step "apidiff: no earlier release and no API baseline, nothing to compare"
	exit 0
fi
step "apidiff against $previous"
GOBIN="$work/bin" quiet go install "$apidiff" || fail "install apidiff"
git -C "$clone" worktree add -q --detach "$work/old" "$previous"
missing=""
for m in "" "${nested[@]}"; do
	dir=${m:-.}
	path=$mod${m:+/$m}
	if [ ! -f "$work/old/$dir/go.mod" ] || ! grep -qx "module $path" "$work/old/$dir/go.mod"; then
		printf '%s: new since %s\n' "$path" "$previous"
		continue
	fi
	(cd "$work/old/$dir" && bounded "$work/bin/apidiff" -m -w "$work/old.api" "$path" 2>"$work/apidiff.log") || fail "apidiff: export of $path at $previous: $(cat "$work/apidiff.log")"
	report=$(cd "$clone/$dir" && bounded "$work/bin/apidiff" -m -incompatible "$work/old.api" "$path" 2>"$work/apidiff.log") || fail "apidiff: $path: $(cat "$work/apidiff.log")"
	[ -n "$report" ] && printf '%s\n' "$report"
	# Each incompatible change is a line "- ./pkg.Name: what" (or
	# "- ./pkg.Type.Field: ...", "- ./pkg: removed"); the CHANGELOG's
	# section must name its last part, in backquotes or not.
	while IFS= read -r l; do
		case $l in "- "*) ;; *) continue ;; esac
		name=${l#- }
		name=${name%%:*}
		name=${name#./}
		name=${name##*.}
		name=${name##*/}
		grep -qw -- "$name" <<<"$section" || missing+=$'\n'"  $path: ${l#- }"
	done <<<"$report"
done
[ -z "$missing" ] || fail "incompatible changes since $previous that CHANGELOG.md's $version section does not name:$missing"
step "apidiff: every incompatible change is in the CHANGELOG"
