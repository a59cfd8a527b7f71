# iop — make targets. `make run` starts the embedded default; `make test` is
# the whole suite CI runs.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.7.0
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -s -w -X main.version=$(VERSION)
BIN         := bin/iop

.PHONY: all build run test fmt-check vet staticcheck lint unit

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/iop

run: build
	./$(BIN) version

test: fmt-check vet staticcheck unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

lint: fmt-check vet staticcheck

unit:
	$(GO) test -race -count=1 ./...
