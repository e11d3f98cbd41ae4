#!/usr/bin/env bash
# Real clients against `tempq emulator`: the AWS SDK for JavaScript v3 (JSON
# protocol, from npm), Debian's awscli package (aws CLI 2.9, which speaks
# SQS's query protocol) and the AWS SDK for Go v2 run the same scenario
# (js/scenario.mjs, awscli_scenario.py, gosdk/main.go): create with
# attributes and tags, send with attributes, batch send, long-poll receive,
# change visibility, delete, delete batch, attributes, tags, list with
# prefix, purge, missing-queue error, delete queue. Each fails on the first
# difference from SQS's documented behaviour. It installs what it needs
# (npm ci here, apt-get install awscli); only where apt-get does not exist
# does it skip the aws CLI, and it says so. `make clients` runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=integration/clients
start=$SECONDS

# Node 22 from the fauxqs install (`make emulator`), else the system's.
node=integration/emulator/node_modules/.bin/node
[ -x "$node" ] || node=node

if [ ! -f "$here/js/node_modules/.installed" ] || [ "$here/js/package-lock.json" -nt "$here/js/node_modules/.installed" ]; then
	(cd "$here/js" && npm ci --no-audit --no-fund --loglevel=error)
	touch "$here/js/node_modules/.installed"
fi

aws=/usr/bin/aws
skip_cli=
if [ ! -x "$aws" ]; then
	if command -v apt-get >/dev/null 2>&1; then
		apt-cache policy awscli | sed -n '1,3p'
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq awscli >/dev/null
	else
		skip_cli="apt-get is not available on this machine, so Debian's awscli (the query-protocol client) cannot be installed"
	fi
fi

tmp=$(mktemp -d)
pid=
cleanup() {
	exec 3>&- 2>/dev/null || true # the emulator stops when its stdin closes
	[ -n "$pid" ] && wait "$pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/" ./cmd/tempq ./$here/gosdk
mkfifo "$tmp/stdin"
"$tmp/tempq" emulator --addr 127.0.0.1:0 -v --until-stdin-eof <"$tmp/stdin" >"$tmp/out" 2>"$tmp/log" &
pid=$!
exec 3>"$tmp/stdin"
for _ in $(seq 300); do
	grep -q '^sqstest listening on ' "$tmp/out" 2>/dev/null && break
	sleep 0.1
done
url=$(sed -n 's/^sqstest listening on //p' "$tmp/out")
[ -n "$url" ] || { echo "clients: tempq emulator did not start:"; cat "$tmp/log"; exit 1; }

"$node" --no-warnings "$here/js/scenario.mjs" "$url"
"$tmp/gosdk" "$url"
if [ -n "$skip_cli" ]; then
	echo "clients: SKIPPED the aws CLI: $skip_cli"
else
	AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x AWS_CONFIG_FILE=/nonexistent AWS_SHARED_CREDENTIALS_FILE=/nonexistent \
		python3 "$here/awscli_scenario.py" "$aws" "$url"
	version=$("$aws" --version 2>&1)
	queries=$(grep -c 'protocol=query' "$tmp/log" || true)
	echo "clients: $version made $queries query-protocol requests"
	if [[ "$version" == aws-cli/2.9.* ]] && [ "$queries" -eq 0 ]; then
		echo "clients: $version should speak the query protocol; the emulator logged none"
		exit 1
	fi
fi
echo "clients: ok in $((SECONDS - start)) s"
