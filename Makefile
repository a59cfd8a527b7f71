# iop — make targets. `make run` starts the embedded default; `make test` is
# the whole suite CI runs.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.7.0
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -s -w -X main.version=$(VERSION)
BIN         := bin/iop

.PHONY: all build run test fmt-check vet staticcheck lint unit js-deps bench bench-quick

# The JavaScript clients of the conformance suite (pinned by package-lock).
JS_DIR := conformance/testdata/js

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/iop

run: build
	./$(BIN) dev

test: fmt-check vet staticcheck unit

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
# a peer gateway (Portkey), all on 127.0.0.1, written to docs/benchmarks.md.
PEER_DIR := cmd/iop-bench/testdata/peer

bench: build
	npm ci --prefix $(PEER_DIR) --no-audit --no-fund
	$(GO) build -o bin/iop-bench ./cmd/iop-bench
	./bin/iop-bench run -iop $(BIN) -portkey $(PEER_DIR) -out docs/benchmarks.md

bench-quick: build
	$(GO) build -o bin/iop-bench ./cmd/iop-bench
	./bin/iop-bench run -quick -iop $(BIN)
