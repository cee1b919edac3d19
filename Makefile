# xpu-cdi: CDI support for Baidu Kunlun XPUs. `make help` lists the targets.

GO       ?= go
VERSION  ?= $(shell git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo unknown)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BINDIR   ?= bin
# The architecture to build for: the host's by default; `make build
# GOARCH=arm64` builds linux/arm64 binaries into $(BINDIR)/linux-arm64, so
# $(BINDIR) itself always holds binaries that run here (the tests and
# hack/demo.sh run them). Debian's and Go's names agree for amd64 and arm64.
HOST_GOARCH := $(shell $(GO) env GOHOSTARCH)
GOARCH   ?= $(HOST_GOARCH)
ARCH_BINDIR = $(if $(filter $(HOST_GOARCH),$(GOARCH)),$(BINDIR),$(BINDIR)/linux-$(GOARCH))
# The architectures of the image's manifest list (make image).
IMAGE_ARCHES ?= amd64 arm64
# The one recipe of the binaries (static, stamped; hack/gobuild.sh says
# why) and the one list of them (cmd/binaries.txt: the name, where each
# ships, its man page's line).
GOBUILD   = VERSION='$(VERSION)' COMMIT='$(COMMIT)' GO='$(GO)' hack/gobuild.sh $(GOARCH)
COMMANDS := $(shell awk '!/^\#/ && NF { print $$1 }' cmd/binaries.txt)
IMAGE_COMMANDS := $(shell awk '!/^\#/ && NF && $$2 ~ /(^|,)image(,|$$)/ { print $$1 }' cmd/binaries.txt)
TOOLS    := /usr/local/lib/xpu-cdi-tools/bin
GOLANGCI ?= $(TOOLS)/golangci-lint
# The OCI image of the binaries (deployments/Containerfile, FROM scratch).
IMAGE_REPO ?= localhost/xpu-cdi
IMAGE    ?= $(IMAGE_REPO):$(subst +,_,$(VERSION))
# The tag the plain manifests name (deployments/helm/manifests.values.yaml):
# make image gives it to the list it builds too; "" leaves it alone.
IMAGE_LATEST ?= $(IMAGE_REPO):latest
PODMAN   ?= podman
# CI has 90 minutes for everything; go test's per-binary limit is raised
# for the end-to-end packages that start real engines.
TEST_TIMEOUT ?= 45m
# internal/testreq.StrictEnv: set to 1, a missing prerequisite fails a test.
TESTREQ_STRICT := XPU_E2E_REQUIRE

.DEFAULT_GOAL := help
.PHONY: help build demo-bin deps test unit unit-user e2e lint bench bench-scale bench-utilization demo image manifests clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build the static binaries into ./bin (stamped); GOARCH=arm64: linux/arm64 ones into ./bin/linux-arm64
	@mkdir -p $(ARCH_BINDIR)
	@for c in $(COMMANDS); do \
		echo "go build $$c (linux/$(GOARCH))"; $(GOBUILD) $(ARCH_BINDIR)/$$c ./cmd/$$c || exit 1; \
	done

deps: ## Install what the tests need (Debian packages, the aarch64 tools, the Debian 13 root of trixie's engines, containerd 2.x, CRI-O, crictl, Kubernetes, Helm); idempotent, root
	hack/install-deps.sh --quiet
	packaging/install-build-deps.sh

# tests/e2e is the longest package (about 30 min) and mostly waits for its
# engines and clusters. It starts first, in a go test of its own, once its
# binary is built; every other package runs beside it, one at a time, so that
# at most two test binaries run at once, as `go test -p 2 ./...` ran them.
# Both run to the end; make test fails when either does.
E2E_PKG := ./tests/e2e
test: deps ## Run every test: unit, end-to-end with real Podman/containerd/CRI-O/Docker, packaging (root for the real ones)
	$(GO) test -c -o /dev/null $(E2E_PKG)
	@rc=0; \
	echo "$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(E2E_PKG) &"; \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(E2E_PKG) & e2e=$$!; \
	echo "$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) \$$($(GO) list ./... | grep -vx '.*/tests/e2e')"; \
	$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -vx '.*/tests/e2e') || rc=$$?; \
	wait $$e2e || rc=$$?; \
	exit $$rc
	$(GO) test -count=1 -tags $(DEMO_TAGS) $(DEMO_TAG_PKGS)
	cd hack/etcd-embed && GOWORK=off $(GO) test -count=1 ./...

# What make demo runs (hack/demo.sh), in one go build: the packages the three
# share compile once, with the flags of make build, and they link side by side.
# The demo has no kubelet: no_podresources leaves out xpu-cdi's PodResources
# client, whose gRPC and protobuf are about a third of its first compile
# (docs/development.md, "Time budget").
DEMO_PKGS := ./cmd/xpu-cdi ./cmd/xpu-runtime-hook ./internal/cmd/xpu-fakehost
DEMO_TAGS := no_podresources
demo-bin:
	@mkdir -p $(ARCH_BINDIR)
	GOTAGS=$(DEMO_TAGS) $(GOBUILD) $(ARCH_BINDIR)/ $(DEMO_PKGS)

UNIT_PKGS := ./pkg/... ./internal/... ./cmd/... ./deployments/... ./docs/...
# The packages whose code differs under the demo's build tags.
DEMO_TAG_PKGS := ./internal/partition/

unit: ## Run the tests that need neither root nor a container engine to be meaningful
	$(GO) test -count=1 $(UNIT_PKGS)
	$(GO) test -count=1 -tags $(DEMO_TAGS) $(DEMO_TAG_PKGS)

# Built by the caller, run as uid 65534 by hack/as-user.sh. Not strict (CI
# and XPU_E2E_REQUIRE unset): the tests that need root skip here, saying so,
# and run as root in make test.
unit-user: ## Run the unit tests as an unprivileged user (uid 65534) to prove they need no root; run as root
	env -u CI -u $(TESTREQ_STRICT) $(GO) test -count=1 -exec $(CURDIR)/hack/as-user.sh $(UNIT_PKGS)
	env -u CI -u $(TESTREQ_STRICT) $(GO) test -count=1 -exec $(CURDIR)/hack/as-user.sh -tags $(DEMO_TAGS) $(DEMO_TAG_PKGS)

e2e: deps ## Run only the end-to-end tests (real engines; root)
	XPU_E2E_REQUIRE=1 $(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) -v ./tests/...

manifests: ## Render the plain manifests deployments/*.yaml from the Helm chart (a test fails when they are stale)
	hack/manifests.sh

# golangci-lint is built by hack/install-deps.sh --only lint (no test needs
# it, so make deps leaves it out): make lint builds it first when missing.
lint: ## go vet, gofmt and golangci-lint v2 (built first when missing: root)
	@[ -x $(GOLANGCI) ] || [ "$$(id -u)" -ne 0 ] || hack/install-deps.sh --quiet --only lint
	$(GO) vet ./...
	$(GO) vet -tags $(DEMO_TAGS) $(DEMO_PKGS) $(DEMO_TAG_PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	@if [ -x $(GOLANGCI) ]; then $(GOLANGCI) run ./...; else echo "golangci-lint not installed: run sudo hack/install-deps.sh --only lint"; exit 1; fi

bench: ## Run the benchmarks and write bench/results.md
	@if [ -x hack/bench.sh ]; then hack/bench.sh; else $(GO) test -run '^$$' -bench . -benchmem ./pkg/...; fi

# make bench-scale: node counts (each a control plane of its own), pods per
# case, the cases (a-f, docs/benchmarks.md) and the results directory.
NODES ?= 50
PODS  ?= 200
CASES ?= a,b
OUT   ?= bench
bench-scale: ## Scheduling at scale on the real control plane with simulated XPU nodes (NODES=100,300,1000 PODS= CASES=a,b,... OUT=bench); root
	XPU_SCALE_NODES=$(NODES) XPU_SCALE_PODS=$(PODS) XPU_SCALE_CASES=$(CASES) XPU_SCALE_OUT=$(abspath $(OUT)) \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestScale$$' -v ./bench/scale/

# make bench-utilization: simulated nodes of 8 P800, jobs per load, the
# trace's seed, the offered loads (1 = saturation), the jobs' mean duration
# and the results directory (OUT, as bench-scale's).
UTIL_NODES    ?= 8
UTIL_JOBS     ?= 250
UTIL_SEED     ?= 1
UTIL_LOADS    ?= 0.7,1.3
UTIL_DURATION ?= 10s
bench-utilization: ## Memory-time utilisation of static layouts vs dynamic partitions on the real scheduler (UTIL_NODES=8 UTIL_JOBS=250 UTIL_SEED=1 UTIL_LOADS=0.7,1.3 UTIL_DURATION=10s OUT=bench); root
	XPU_UTIL_NODES=$(UTIL_NODES) XPU_UTIL_JOBS=$(UTIL_JOBS) XPU_UTIL_SEED=$(UTIL_SEED) XPU_UTIL_LOADS=$(UTIL_LOADS) \
		XPU_UTIL_DURATION=$(UTIL_DURATION) XPU_UTIL_OUT=$(abspath $(OUT)) \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestUtilization$$' -v ./bench/scale/

demo: ## Build, create a demo Kunlun host in a temp dir, discover it, generate a spec and use it with Podman
	hack/demo.sh

# One image per architecture of IMAGE_ARCHES ($(IMAGE)-<arch>, from that
# architecture's `make build`), gathered in the manifest list $(IMAGE); an
# older list or image of that name is replaced. IMAGE_LATEST moves to the
# new list.
image: ## Build the OCI manifest list $(IMAGE), also tagged $(IMAGE_LATEST) (amd64 + arm64 images of the static binaries, FROM scratch) with Podman; nothing pulled
	@for a in $(IMAGE_ARCHES); do $(MAKE) --no-print-directory build GOARCH=$$a || exit 1; done
	@for a in $(IMAGE_ARCHES); do \
		bins=$(BINDIR); [ "$$a" = "$(HOST_GOARCH)" ] || bins=$(BINDIR)/linux-$$a; \
		ctx=_output/image/$$a; rm -rf $$ctx && mkdir -p $$ctx/bin || exit 1; \
		for c in $(IMAGE_COMMANDS); do cp $$bins/$$c $$ctx/bin/ || exit 1; done; \
		$(PODMAN) build --pull=never --no-cache --platform linux/$$a -f deployments/Containerfile \
			--label org.opencontainers.image.version=$(VERSION) --label org.opencontainers.image.revision=$(COMMIT) \
			-t $(IMAGE)-$$a $$ctx || exit 1; \
	done
	@if $(PODMAN) manifest exists $(IMAGE); then $(PODMAN) manifest rm $(IMAGE) >/dev/null; \
	elif $(PODMAN) image exists $(IMAGE); then $(PODMAN) rmi $(IMAGE) >/dev/null; fi
	$(PODMAN) manifest create $(IMAGE)
	@for a in $(IMAGE_ARCHES); do \
		echo "$(PODMAN) manifest add $(IMAGE) containers-storage:$(IMAGE)-$$a"; \
		$(PODMAN) manifest add $(IMAGE) containers-storage:$(IMAGE)-$$a >/dev/null || exit 1; \
	done
	@if [ -n "$(IMAGE_LATEST)" ] && [ "$(IMAGE_LATEST)" != "$(IMAGE)" ]; then \
		echo "$(PODMAN) tag $(IMAGE) $(IMAGE_LATEST)"; $(PODMAN) tag $(IMAGE) $(IMAGE_LATEST) || exit 1; \
	fi

clean: ## Remove build outputs
	rm -rf $(BINDIR) dist _output

include packaging/packaging.mk
