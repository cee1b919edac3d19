# xpu-cdi: CDI support for Baidu Kunlun XPUs. `make help` lists the targets.

GO       ?= go
VERSION  ?= $(shell git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo unknown)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BINDIR   ?= bin
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Every binary is static: the hook and the shim run as root next to
# untrusted images and must never start the dynamic loader.
# urfave_cli_no_docs drops urfave/cli's man/markdown generator, whose init
# (blackfriday) cost about 1 ms at every start of the hook (docs/benchmarks.md).
BUILD_TAGS := urfave_cli_no_docs
GOBUILD  := CGO_ENABLED=0 $(GO) build -trimpath -tags $(BUILD_TAGS) -ldflags "$(LDFLAGS)"
COMMANDS := xpu-cdi xpu-runtime-hook xpu-container-runtime xpu-device-plugin xpu-dra-driver
TOOLS    := /usr/local/lib/xpu-cdi-tools/bin
GOLANGCI ?= $(TOOLS)/golangci-lint
# The OCI image of the binaries (deployments/Containerfile, FROM scratch).
IMAGE    ?= localhost/xpu-cdi:$(subst +,_,$(VERSION))
PODMAN   ?= podman
# CI has 90 minutes for everything; go test's per-binary limit is raised
# for the end-to-end packages that start real engines.
TEST_TIMEOUT ?= 45m

.DEFAULT_GOAL := help
.PHONY: help build deps test unit e2e lint bench demo image clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build the static binaries into ./bin (stamped with version and commit)
	@mkdir -p $(BINDIR)
	@for c in $(COMMANDS); do \
		if ls cmd/$$c/*.go >/dev/null 2>&1; then echo "go build $$c"; $(GOBUILD) -o $(BINDIR)/$$c ./cmd/$$c || exit 1; fi; \
	done

deps: ## Install what the tests need (Debian packages, containerd 2.x, CRI-O, crictl, golangci-lint); idempotent, root
	hack/install-deps.sh --quiet
	packaging/install-build-deps.sh

test: deps ## Run every test: unit, end-to-end with real Podman/containerd/CRI-O/Docker, packaging (root for the real ones)
	$(GO) test -count=1 -p 2 -timeout $(TEST_TIMEOUT) ./...

unit: ## Run the tests that need neither root nor a container engine to be meaningful
	$(GO) test -count=1 ./pkg/... ./internal/... ./cmd/... ./deployments/...

e2e: deps ## Run only the end-to-end tests (real engines; root)
	XPU_E2E_REQUIRE=1 $(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) -v ./tests/...

lint: ## go vet, gofmt and golangci-lint v2
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	@if [ -x $(GOLANGCI) ]; then $(GOLANGCI) run ./...; else echo "golangci-lint not installed: run make deps"; exit 1; fi

bench: ## Run the benchmarks and write bench/results.md
	@if [ -x hack/bench.sh ]; then hack/bench.sh; else $(GO) test -run '^$$' -bench . -benchmem ./pkg/...; fi

demo: ## Build, create a demo Kunlun host in a temp dir, discover it, generate a spec and use it with Podman
	hack/demo.sh

image: build ## Build the OCI image $(IMAGE) of the static binaries FROM scratch with Podman (nothing pulled)
	$(PODMAN) build --pull=never --no-cache -f deployments/Containerfile \
		--label org.opencontainers.image.version=$(VERSION) --label org.opencontainers.image.revision=$(COMMIT) \
		-t $(IMAGE) $(BINDIR)

clean: ## Remove build outputs
	rm -rf $(BINDIR) dist _output

include packaging/packaging.mk
