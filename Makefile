# iop — make targets. `make run` starts the embedded default; `make test` is
# the whole suite CI runs.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.7.0
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -s -w -X main.version=$(VERSION)
BIN         := bin/iop

.PHONY: all build run test fmt-check vet staticcheck lint unit unit-inprocess unit-stack js-deps bench bench-quick bench-allocs fuzz fuzz-pr soak

# The JavaScript clients of the conformance suite (pinned by package-lock).
JS_DIR := conformance/testdata/js

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/iop

run: build
	./$(BIN) dev

test: fmt-check vet staticcheck unit unit-inprocess unit-stack fuzz-pr

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

lint: fmt-check vet staticcheck

unit: js-deps
	$(GO) test -race -count=1 ./...

# The e2e and conformance suites again with every cluster node on the
# edge's in-process channel (iop dev's and the all-in-one gateway's link).
unit-inprocess: js-deps
	IOP_TEST_NODE_LINK=in-process $(GO) test -race -count=1 ./internal/testing/e2e ./conformance

# The held-stream stack guard (internal/testing/e2e/heldstack_test.go):
# frame sizes differ under the race detector, so it runs without it.
# One process per link: stacks an earlier test freed skew the measure.
unit-stack:
	$(GO) test -count=1 -run '^TestHeldStreamStack$$' ./internal/testing/e2e
	$(GO) test -count=1 -run '^TestHeldStreamStackTCP$$' ./internal/testing/e2e

# Fuzz targets (RELIABILITY.md F1–F7) as package:Target. Crashers land in
# the package's testdata/fuzz and then run as ordinary tests.
FUZZ_TARGETS := \
	codec/openai:FuzzDecodeChatRequest \
	codec/openai:FuzzDecodeResponsesRequest \
	codec/openai:FuzzWithFormModel \
	codec/jsonstrict:FuzzCheck \
	codec/eventstream:FuzzSSEReader \
	codec/eventstream:FuzzObserver \
	nodeagent/providers/openai:FuzzReadStream \
	nodeagent/providers/ollama:FuzzReadNDJSON \
	gateway/fleet:FuzzNodeMessages \
	nodeagent:FuzzAttemptDown \
	streamgate:FuzzAttemptLifecycle \
	nodeagent:FuzzStallObservationRedaction \
	gateway/pool:FuzzHealthObservationRedaction \
	streamgate:FuzzRecoveryObservationRedaction \
	execution:FuzzStallTimeout
# The per-change subset make test runs (4 × 30 s).
FUZZ_PR := nodeagent/providers/openai:FuzzReadStream gateway/fleet:FuzzNodeMessages streamgate:FuzzAttemptLifecycle codec/eventstream:FuzzObserver
FUZZTIME ?= 10m

# A target that ends with only "context deadline exceeded", no input
# written, hit the fuzzing engine's race at -fuzztime's end
# (go.dev/issue/75804, fixed in Go 1.27), not a finding: it runs once
# more. Anything else that fails, fails.
define run-fuzz
	@for t in $(1); do pkg=$${t%%:*}; fn=$${t##*:}; \
		for try in 1 2; do \
			echo "fuzz $$fn ($$pkg) for $(2)"; \
			log=$$(mktemp); \
			{ $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(2) ./$$pkg; echo $$? > $$log.rc; } 2>&1 | tee $$log; \
			rc=$$(cat $$log.rc); out=$$(cat $$log); rm -f $$log $$log.rc; \
			[ $$rc = 0 ] && break; \
			if [ $$try = 1 ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
				echo "fuzz $$fn: the engine's deadline race at -fuzztime's end (go.dev/issue/75804), nothing found: once more"; continue; \
			fi; \
			exit 1; \
		done; \
	done
endef

# Every fuzz target for FUZZTIME each (nightly: 10 min).
fuzz:
	$(call run-fuzz,$(FUZZ_TARGETS),$(FUZZTIME))

fuzz-pr:
	$(call run-fuzz,$(FUZZ_PR),30s)

# Long soaks (the fleet under every failure for 60 s, RELIABILITY.md R20 at
# full length, R21 nightly size); make test runs them shortened.
soak:
	IOP_FLEET_DURATION=60s $(GO) test -count=1 -timeout 10m -run '^TestFleetFailures$$' -v ./internal/testing/e2e
	IOP_SOAK_STREAMS=200 IOP_SOAK_DURATION=60s $(GO) test -race -count=1 -timeout 20m -run '^TestSoak$$' -v ./internal/testing/e2e
	IOP_SOAK_STREAMS=1000 IOP_SOAK_DURATION=10m IOP_SOAK_FAULTS=1 IOP_SOAK_DISCONNECTS=0.05 \
		$(GO) test -count=1 -timeout 40m -run '^TestSoak$$' -v ./internal/testing/e2e

js-deps: $(JS_DIR)/node_modules/.installed

$(JS_DIR)/node_modules/.installed: $(JS_DIR)/package-lock.json $(JS_DIR)/package.json
	npm ci --prefix $(JS_DIR) --no-audit --no-fund
	touch $@

# Regenerate the node-link protobuf code (committed) with pinned generators.
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2

.PHONY: proto
proto:
	@command -v protoc >/dev/null || { echo "installing protoc (Debian protobuf-compiler)"; sudo=$$(command -v sudo || true); $$sudo apt-get install -y protobuf-compiler; }
	GOBIN=$(CURDIR)/bin $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(CURDIR)/bin $(GO) install $(PROTOC_GEN_GO_GRPC)
	PATH=$(CURDIR)/bin:$$PATH protoc -I wire --go_out=wire --go_opt=paths=source_relative \
		--go-grpc_out=wire --go-grpc_opt=paths=source_relative wire/nodelink.proto

# Benchmarks: iop against a direct connection, a naive Go reverse proxy and
# a peer gateway (Portkey), all on 127.0.0.1, written to docs/benchmarks.md,
# with the goal table (pass/fail per cell), and the summary table of both
# node-link channels beside the floor into docs/performance.md. BASELINE=path/to/older/iop adds
# that binary's figures to the same run ("before:" rows).
PEER_DIR := cmd/iop-bench/testdata/peer

bench: build bench-allocs
	npm ci --prefix $(PEER_DIR) --no-audit --no-fund
	$(GO) build -o bin/iop-bench ./cmd/iop-bench
	./bin/iop-bench run -iop $(BIN) -portkey $(PEER_DIR) -out docs/benchmarks.md -summary docs/performance.md $(if $(BASELINE),-baseline $(BASELINE))

# Allocation benchmarks of the per-request and per-chunk paths (time and
# allocations per operation), so regressions show in review.
bench-allocs:
	$(GO) test -run '^$$' -bench 'BenchmarkGateway|BenchmarkObserveChat|BenchmarkChatStreamAppend' -benchmem -benchtime 2000x \
		./internal/testing/e2e ./codec/eventstream ./codec/openai
	$(GO) test -run '^$$' -bench 'BenchmarkOpenStreams' -benchtime 1x ./internal/testing/e2e

bench-quick: build
	$(GO) build -o bin/iop-bench ./cmd/iop-bench
	./bin/iop-bench run -quick -iop $(BIN) $(if $(BASELINE),-baseline $(BASELINE))
