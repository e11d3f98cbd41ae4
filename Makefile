# tempqueues build and test entry points. `make test` is the command CI runs
# (through .ci/run) and the one README.md gives: it installs what it needs.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
EMULATOR    := integration/emulator
# Packages whose tests need a running fauxqs get one from
# internal/testkit/sqstestenv.
PKGS        := ./...
MODULE      := github.com/tempqueues/tempqueues
TIMING      := cmd/tempq/internal/bench

# Nested modules (own go.mod, so library users do not inherit their
# dependencies), each vetted, staticchecked and tested under -race by its
# own target, nested/<dir>.
NESTED      := redisstore lambdatempq examples/lambda oteltempq sqsgrpc examples/grpc-over-sqs s3payload examples/large-payload
# How many checks `make test` runs at once. Most of a check's time is spent
# waiting (emulators, browsers, timers in real servers), so on a 2-core
# machine four at a time take about half the time of one at a time.
JOBS        ?= 4

.PHONY: test checks timing deps emulator redis fmt vet staticcheck unit docs nested console clients release release-deps clean-emulator

# Installs first (npm and apt-get must not run twice at once), then runs the
# checks JOBS at a time, each one's output printed whole when it ends.
test: emulator deps fmt
	$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target checks
	$(MAKE) --no-print-directory timing

checks: unit $(addprefix nested/,$(NESTED)) release console clients vet staticcheck

# The Debian packages the checks use: redis-server (redisstore's tests),
# chromium (the console's), awscli (integration/clients), in one apt-get.
deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	{ [ -x /usr/bin/aws ] || ! command -v apt-get >/dev/null; } || missing="$$missing awscli"; \
	if [ -n "$$missing" ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; fi

# Installs the pinned fauxqs + Node 22 when missing (package-lock.json pins both).
# npm warns EBADENGINE when the npm that installs runs on an older Node
# (20): fauxqs wants Node >= 22.5, and it gets it, since it runs on the
# pinned node@22 package, whose install script package.json's allowScripts
# approves. The check below fails if that Node did not install.
emulator: $(EMULATOR)/node_modules/.installed

$(EMULATOR)/node_modules/.installed: $(EMULATOR)/package.json $(EMULATOR)/package-lock.json
	@command -v npm >/dev/null || { echo "make: npm is required to install the SQS emulator (fauxqs)"; exit 1; }
	cd $(EMULATOR) && npm ci --no-audit --no-fund
	@$(EMULATOR)/node_modules/.bin/node --version | grep -q '^v22\.' || { echo "make: node@22 did not install (check npm install-scripts)"; exit 1; }
	@touch $@

# redis-server (Debian package) for the redisstore tests, which start their
# own servers on 127.0.0.1 with random ports and use no system service.
redis:
	@command -v redis-server >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; }

fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run $(STATICCHECK) $(PKGS)

# -race over every package, the fauxqs-backed ones included. Fuzz targets run
# their seed corpus as ordinary tests.
unit:
	$(GO) test -race -count=1 -timeout 15m $$($(GO) list $(PKGS) | grep -v '^$(MODULE)/$(TIMING)$$')

# The benchmark harness's own tests measure CPU and RPCs in windows of a
# few hundred milliseconds of real time: they run alone, after the checks,
# since the checks' load starves those windows (one run in four failed).
timing:
	$(GO) test -race -count=1 -timeout 5m ./$(TIMING)

# The docs' checks alone, which `unit` runs with the rest: README's quick
# start is examples/quickstart verbatim, and every ```go block of README.md,
# CONTRIBUTING.md and docs/*.md compiles (internal/doccheck, one go vet of
# a generated module in a workspace with the nested modules).
docs:
	$(GO) test -count=1 -run 'TestReadmeShowsThisProgram|TestSnippetsCompile|TestGenerate' ./examples/quickstart ./internal/doccheck

# The nested modules: redisstore, lambdatempq (and its example,
# examples/lambda), oteltempq, sqsgrpc (and its example,
# examples/grpc-over-sqs), s3payload (its tests on gofakes3 in process, and
# on fauxqs's S3 with the emulator), and examples/large-payload (50 MiB
# through S3 with sqshttp and sqsgrpc, on the same two).
nested: $(addprefix nested/,$(NESTED))

nested/%: redis emulator
	cd $* && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) test -race -count=1 -timeout 10m ./...

# The web console's browser tests (integration/console, a module of its own
# so that chromedp stays out of the core module): Debian's chromium,
# installed when missing, driven headless through tempq emulator's console.
console:
	@command -v chromium >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }
	cd integration/console && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) test -race -count=1 -timeout 10m ./...

# Real SQS clients (JavaScript SDK v3, Debian's aws CLI 2.9 over the query
# protocol, Go SDK) drive tempq emulator through one scenario; installs
# what it needs (npm, apt-get).
clients: emulator
	bash integration/clients/run.sh

# The release check (docs/versioning.md): the committed tree tagged in a
# clone, served as if published, each module installed with go get into a
# fresh module, a program using all of them run against tempq emulator,
# apidiff against the previous release. The check itself is offline;
# release-deps fills this machine's module cache first (the Go module
# proxy, for what the cache lacks).
release: release-deps
	timeout 900 bash integration/release/run.sh

release-deps:
	$(GO) mod download
	for m in redisstore oteltempq lambdatempq sqsgrpc s3payload; do (cd $$m && $(GO) mod download) || exit 1; done
	d=$$(mktemp -d) && GOBIN=$$d $(GO) install golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4; rc=$$?; rm -rf "$$d"; exit $$rc

clean-emulator:
	rm -rf $(EMULATOR)/node_modules
