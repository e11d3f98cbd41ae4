#!/usr/bin/env bash
# A new user's first contact with tempqueues, end to end, so that it cannot
# rot: a fresh clone, no AWS configuration at all, the README's programs,
# a first program in a module of its own outside the repository, and the
# tempq walk-through of docs/cli.md against `tempq emulator`. CI runs it
# (.ci/run); it takes well under a minute with a warm Go build cache.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
step() { printf '== %s\n' "$*"; }
fail() { printf 'firstcontact: %s\n' "$*" >&2; exit 1; }
expect() { # expect NAME WANT GOT
	[ "$2" = "$3" ] || fail "$1: got $(printf %q "$3"), want $(printf %q "$2")"
}

# The clone comes first, under this user's git configuration (which may
# mark the checkout as a safe directory).
step "git clone"
git clone -q "$root" "$work/tempqueues"
clone="$work/tempqueues"

# A newcomer's machine: no AWS_* variable, no ~/.aws (HOME is empty), but
# the Go caches and settings of this machine, so that nothing is
# downloaded again.
export GOPATH="$(go env GOPATH)" GOCACHE="$(go env GOCACHE)" GOMODCACHE="$(go env GOMODCACHE)" GOENV="$(go env GOENV)"
for v in $(env | sed -n 's/^\(AWS_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export HOME="$work/home"
mkdir -p "$HOME"
cd "$clone"

step "go run ./examples/quickstart (the README's program)"
expect quickstart $'hello, alice\nhello, bob\nhello, carol' "$(go run ./examples/quickstart)"

step "go run ./examples/login"
go run ./examples/login >"$work/login.out" || fail "examples/login failed: $(cat "$work/login.out")"
go run ./examples/login -h >/dev/null 2>&1 || fail "go run ./examples/login -h did not exit 0"

step "go test -run Example -v ./responder"
go test -count=1 -run Example -v ./responder >"$work/examples.out" || fail "responder Examples: $(cat "$work/examples.out")"
grep -q '^--- PASS: Example' "$work/examples.out" || fail "no responder Example ran: $(cat "$work/examples.out")"

step "tempq emulator"
go build -o "$work/bin/tempq" ./cmd/tempq
tempq="$work/bin/tempq"
mkfifo "$work/emulator.out"
"$tempq" emulator --addr 127.0.0.1:0 >"$work/emulator.out" &
pids+=($!)
exec 3<"$work/emulator.out"
read -r -t 30 line <&3 || fail "tempq emulator printed nothing"
endpoint=${line##* }
case $endpoint in http://127.0.0.1:*) ;; *) fail "tempq emulator printed $(printf %q "$line")" ;; esac

step "AWS_ENDPOINT_URL_SQS=$endpoint tempq queues, serve-echo, call"
export AWS_ENDPOINT_URL_SQS=$endpoint # and no other variable
"$tempq" queues >"$work/queues.out" || fail "tempq queues: $(cat "$work/queues.out")"
grep -q 'no queues with prefix' "$work/queues.out" || fail "tempq queues printed $(cat "$work/queues.out")"
mkfifo "$work/serve.out"
"$tempq" serve-echo --queue echo >"$work/serve.out" 2>"$work/serve.err" &
serve=$!
pids+=($serve)
exec 4<"$work/serve.out"
read -r -t 30 line <&4 || fail "tempq serve-echo printed nothing"
case $line in "serving echo on "*) ;; *) fail "tempq serve-echo printed $(printf %q "$line")" ;; esac
expect "tempq call" "hello" "$("$tempq" call --queue echo hello)"
kill -INT "$serve"
wait "$serve" || fail "tempq serve-echo exited $? on Ctrl-C"
exec 4<&-

step "tempq create-queue, send, receive, purge-queue, list-queues, delete-queue"
# The queue verbs of docs/cli.md, with their output and exit codes.
url=$("$tempq" create-queue --queue first-orders) || fail "tempq create-queue exited $?"
expect "tempq create-queue" "$endpoint/000000000000/first-orders" "$url"
"$tempq" send --queue first-orders --attr tenant=acme "one" >/dev/null || fail "tempq send one exited $?"
"$tempq" send --queue "$url" "two" >/dev/null || fail "tempq send two exited $?"
got=$("$tempq" receive --queue first-orders --max 10 --wait 1s --delete | sort) || fail "tempq receive --delete exited $?"
expect "tempq receive --delete" $'one\ntwo' "$got"
expect "tempq receive (empty)" "[]" "$("$tempq" receive --queue first-orders --json)"
"$tempq" send --queue first-orders "three" >/dev/null || fail "tempq send three exited $?"
expect "tempq purge-queue" "purged $url" "$("$tempq" purge-queue --queue first-orders)"
expect "tempq receive after the purge" "" "$("$tempq" receive --queue first-orders)"
expect "tempq list-queues" "$url" "$("$tempq" list-queues --prefix first-)"
expect "tempq delete-queue" "deleted $url" "$("$tempq" delete-queue --queue first-orders)"
expect "tempq list-queues (none)" "" "$("$tempq" list-queues --prefix first-)"
# Bad input: exit 2 naming the flag; a missing queue: exit 1.
set +e
err=$("$tempq" send --queue first-orders --delay 16m x 2>&1); code=$?
set -e
expect "tempq send --delay 16m: exit code" 2 "$code"
case $err in *--delay*) ;; *) fail "tempq send --delay 16m said $(printf %q "$err")" ;; esac
set +e
err=$("$tempq" receive --queue first-orders 2>&1); code=$?
set -e
expect "tempq receive of a deleted queue: exit code" 1 "$code"
case $err in *'does not exist'*) ;; *) fail "tempq receive of a deleted queue said $(printf %q "$err")" ;; esac

step "the README's program against tempq emulator"
# A program built on config.LoadDefaultConfig needs what the SDK needs:
# a region and credentials (any, for an emulator), as README.md says.
sdkenv=(AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=first AWS_SECRET_ACCESS_KEY=first)
expect "quickstart on the emulator" $'hello, alice\nhello, bob\nhello, carol' "$(env "${sdkenv[@]}" go run ./examples/quickstart)"

step "a first program in a module of its own"
mkdir "$work/first"
cd "$work/first"
go mod init example.com/first >/dev/null 2>&1
go mod edit -require=github.com/tempqueues/tempqueues@v0.0.0 -replace=github.com/tempqueues/tempqueues="$clone"
cp "$root/integration/firstcontact/first.go.txt" main.go
go mod tidy >/dev/null 2>&1 || fail "go mod tidy: $(go mod tidy 2>&1)"
expect "first program" $'PING\nPONG' "$(env "${sdkenv[@]}" go run .)"

step "ok"
