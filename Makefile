GO        ?= go
BIN       := bin
VERSION   ?= 0.1.0
LDFLAGS   := -X github.com/svc-dev/svc/engine/version.Version=$(VERSION)
# go-control-plane's generated vtprotobuf marshaling: the sidecar's gRPC
# codec encodes ext_authz answers with it instead of protobuf reflection.
TAGS      := vtprotobuf
FUZZTIME  ?= 20s
# Debian's interpreter: the frameworks the SDK tests use are Debian packages
# (scripts/test-packages.txt), which only /usr/bin/python3 sees.
PYTHON    ?= /usr/bin/python3

.PHONY: all build run demo test test-sdk test-deploy test-rust bench-rust chaos bench fuzz lint generate docs deps clean dist dist-sdk

all: build

build:
	$(GO) build -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# Runs the sidecar on the embedded default: development mode (no IdP),
# the default policy, loopback listeners. The repository root has no
# svc.toml, so nothing but SVC_* variables you set yourself applies.
run: build
	./$(BIN)/svc-sidecar

# The local mesh demo (docker-compose.yml; walkthrough in docs/demo.md):
# Envoy, the sidecar, identity providers, two services, telemetry and
# traffic. Needs Docker with the compose plugin.
demo:
	@if ! command -v docker >/dev/null 2>&1; then \
	  echo "make demo: docker is not installed; the demo needs Docker Engine with the compose plugin (https://docs.docker.com/compose/install/)" >&2; exit 1; fi
	@if ! docker compose version >/dev/null 2>&1; then \
	  echo "make demo: 'docker compose' is not available; install the Docker Compose plugin (https://docs.docker.com/compose/install/)" >&2; exit 1; fi
	@if ! docker info >/dev/null 2>&1; then \
	  echo "make demo: cannot reach a Docker engine (is the daemon running, and may this user use it?)" >&2; exit 1; fi
	docker compose up --build

# Installs what the tests need (Debian packages, npm packages from the
# lockfile) and runs vet plus the whole suite with the race detector; then
# the allocation bars (Test*Allocs*, which the race detector's own
# allocations make skip) and the codec tests without it, with the build's
# tags; then the SDK tests against the real svc-sidecar, then the tests of
# the deployment files (deploy/, a module of its own).
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) test -tags '$(TAGS)' -count=1 -run 'Allocs|Codec' ./engine/... ./envoy/ ./sidecar/... ./internal/otelhist/
	$(MAKE) test-sdk
	$(MAKE) test-deploy
	$(MAKE) test-rust

# Rewrites the generated parts of docs/: the configuration keys and the
# reason codes (cmd/internal/docgen), the core and svc-sidecar references
# (cmd/core, cmd/svc-sidecar). The same tests without -update, part of
# make test, fail when a page is not current. Both CLI tests rewrite
# docs/cli.md, hence -p 1.
docs:
	$(GO) test -count=1 -run TestGeneratedPagesCurrent ./cmd/internal/docgen/ -update
	$(GO) test -count=1 -p 1 -run TestCLIReferenceCurrent ./cmd/core/ ./cmd/svc-sidecar/ -update

# The Python and TypeScript SDKs' tests, against a svc-sidecar built from
# this tree (npm ci ran in deps). The TypeScript build and type check must
# pass without errors.
test-sdk:
	$(GO) build -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/svc-sidecar ./cmd/core
	cd sdk/python && SVC_SIDECAR_BIN=$(abspath $(BIN))/svc-sidecar SVC_CORE_BIN=$(abspath $(BIN))/core \
		$(PYTHON) -m unittest discover -s tests -v
	cd sdk/typescript && npm run --silent build && npm run --silent typecheck && \
		SVC_SIDECAR_BIN=$(abspath $(BIN))/svc-sidecar SVC_CORE_BIN=$(abspath $(BIN))/core npm test --silent

# The Kubernetes, Istio and Compose files, decoded by their own libraries.
# deploy/ requires this module through a replace directive; -mod=mod lets
# its go.mod and go.sum follow when this module's requirements change.
test-deploy:
	cd deploy && $(GO) vet -mod=mod ./... && $(GO) test -mod=mod -race -count=1 ./...

# The fault matrix, long version: three replicas, Redis, nginx serving
# signed bundles, the IdPs, under load; each fault held 20 s. Prints the
# table and regenerates docs/reliability.md from it. (The short version,
# faults held 2.5 s, is TestChaosMatrix in make test.)
chaos: deps
	$(GO) test -count=1 -timeout 30m -v -run '^TestChaosMatrix$$' ./e2e/ \
		-chaos.long -chaos.write=$(abspath docs/reliability.md)

deps:
	./scripts/install-test-deps.sh

# Release builds: svc-sidecar, core and svc-demo for each platform, static
# (CGO_ENABLED=0), -trimpath, the version stamped, into
# $(DIST)/svc_<version>_<os>_<arch>/; then an SPDX SBOM of the Go modules in
# them (scripts/sbom), the SDK artifacts (dist-sdk) and SHA256SUMS of
# everything. Not part of make test (scripts/sbom's test runs it for the
# native platform).
DIST           ?= dist
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
dist:
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(MAKE) --no-print-directory dist-sdk DIST='$(DIST)'
	set -e; for p in $(DIST_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  echo "dist: $$os/$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -tags '$(TAGS)' -ldflags '-s -w $(LDFLAGS)' \
	    -o $(DIST)/svc_$(VERSION)_$${os}_$${arch}/ ./cmd/svc-sidecar ./cmd/core ./cmd/svc-demo; \
	done
	$(GO) build -o $(DIST)/sbom.tmp ./scripts/sbom
	cd $(DIST) && ./sbom.tmp -name svc -version $(VERSION) -o svc_$(VERSION).spdx.json svc_$(VERSION)_*/* && rm sbom.tmp
	cd $(DIST) && sha256sum svc_$(VERSION)_*/* svc_$(VERSION).spdx.json $(SDK_ARTIFACTS) > SHA256SUMS

# The SDK artifacts the install lines of docs/python.md and
# docs/typescript.md use, into $(DIST) with SHA256SUMS of them: the wheel,
# built by Debian's python3-build from a copy of sdk/python (setuptools
# writes build/ and *.egg-info beside the sources it builds), and the npm
# tarball (npm pack; its prepack compiles sdk/typescript/dist/, which is
# ignored). The repository is left as clean as it was. The SDKs carry
# their own versions (pyproject.toml, package.json), not $(VERSION). make
# dist runs it; the install-line tests (e2e/install_test.go) run it alone.
SDK_ARTIFACTS := svc_sdk-*-py3-none-any.whl svc-sdk-*.tgz
dist-sdk:
	mkdir -p $(DIST)
	cd $(DIST) && rm -f $(SDK_ARTIFACTS)
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  cp -R sdk/python "$$tmp/python"; \
	  rm -rf "$$tmp/python/build" "$$tmp/python/dist" "$$tmp"/python/*.egg-info; \
	  cd "$$tmp/python" && $(PYTHON) -m build --wheel --no-isolation --outdir "$(abspath $(DIST))" >"$$tmp/build.log" 2>&1 \
	    || { cat "$$tmp/build.log" >&2; exit 1; }
	cd sdk/typescript && { test -d node_modules || npm ci --no-audit --no-fund; } && \
	  npm pack --silent --pack-destination "$(abspath $(DIST))" >/dev/null
	cd $(DIST) && sha256sum $(SDK_ARTIFACTS) > SHA256SUMS

bench:
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench . -benchmem -benchtime=2s ./...

fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

# staticcheck, pinned: 0.8.x is the release line that knows go1.26.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd deploy && $(GO) vet -mod=mod ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi

generate:
	./scripts/generate.sh

clean:
	rm -rf $(BIN)

# Envoy Check throughput of svc-sidecar (as production runs it) against a
# no-op ext_authz server, in one run: checks/s, p50/p99 and their ratios.
# How the costs grow with the work (scripts/benchscale): policy data of
# 100 to 1M entries, 10 to 1,000 rules, distinct tokens, 10k tenants'
# rate limits, bundles of 1 to 30 MB, the HTTP check path against a no-op
# server; each row with its bound, the table and the curves written into
# docs/benchmarks.md. About 15-20 minutes on 2 cores; not part of make test.
.PHONY: bench-scale
bench-scale:
	$(GO) run ./scripts/benchscale -write docs/benchmarks.md

# Default policy evaluation latency (core policy bench, median of 3 runs)
# beside opa bench of the same policy and input.
.PHONY: bench-policy
bench-policy:
	GO=$(GO) ./scripts/bench-policy.sh

.PHONY: bench-compare
bench-compare:
	$(GO) test -run '^$$' -bench CompareNoop -benchtime 1x -count 1 -timeout 10m ./e2e/

# The Rust crate (sdk/rust): the Go engine built as a C archive and linked
# in-process. Offline, from Debian's librust-*-dev packages (deps).
CARGO ?= cargo
.PHONY: test-rust bench-rust
test-rust:
	cd sdk/rust && SVC_GO=$(GO) $(CARGO) test

# A cached validate_token across the C boundary beside the Go engine's
# cached ValidateToken, in one run.
bench-rust:
	$(GO) test -run '^$$' -bench 'BenchmarkValidateToken$$' -benchtime 2s ./engine/
	$(GO) test -run '^$$' -bench 'ValidateToken$$' -benchtime 2s ./sdk/rust/capi/
	cd sdk/rust && SVC_GO=$(GO) $(CARGO) test --release --test bench -- --ignored --nocapture
