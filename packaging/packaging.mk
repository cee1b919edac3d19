# Packaging targets, included by the top-level Makefile; also usable alone:
#   make -f packaging/packaging.mk deb rpm packaging-test
# Outputs: $(DIST)/xpu-cdi_<version>_<arch>.deb, $(DIST)/xpu-cdi-<version>-1.<arch>.rpm
# See docs/packaging.md.

VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo unknown)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# dpkg/rpm version derived from VERSION (v1.2.3-4-gabc -> 1.2.3+4.gabc).
PKG_VERSION ?= $(shell packaging/pkg-version.sh '$(VERSION)')
# Expanded once: others may commit while a package builds.
VERSION := $(VERSION)
COMMIT := $(COMMIT)
PKG_VERSION := $(PKG_VERSION)
DIST ?= dist
PKG_STAGE ?= _output/packaging/stage
# A directory with the three binaries already built (static, stamped), to
# package those instead of building them again.
PREBUILT_BINDIR ?=
# The architecture packaged: the host's by default; GOARCH=arm64 gives an
# arm64 .deb and an aarch64 .rpm of linux/arm64 binaries.
GOARCH ?= $(shell go env GOHOSTARCH)
DEB_ARCH = $(GOARCH)
RPM_ARCH = $(or $(if $(filter amd64,$(GOARCH)),x86_64),$(if $(filter arm64,$(GOARCH)),aarch64),$(GOARCH))

.PHONY: deb rpm packaging-stage packaging-build-deps packaging-test

packaging-build-deps: ## Install the Debian packages that make deb/rpm need (root)
	packaging/install-build-deps.sh

packaging-stage:
	VERSION='$(VERSION)' COMMIT='$(COMMIT)' PREBUILT_BINDIR='$(PREBUILT_BINDIR)' GOARCH='$(GOARCH)' \
		packaging/stage.sh '$(PKG_STAGE)'

deb: packaging-stage ## Build $(DIST)/xpu-cdi_<version>_<arch>.deb (dpkg-buildpackage; GOARCH=arm64 for arm64) and run lintian
	COMMIT='$(COMMIT)' DEB_ARCH='$(DEB_ARCH)' packaging/deb/build.sh '$(PKG_STAGE)' '$(DIST)' '$(PKG_VERSION)'
	lintian --fail-on error '$(DIST)/xpu-cdi_$(PKG_VERSION)_$(DEB_ARCH).deb'

rpm: packaging-stage ## Build $(DIST)/xpu-cdi-<version>-1.<arch>.rpm (rpmbuild; GOARCH=arm64 for aarch64) and run rpmlint
	RPM_ARCH='$(RPM_ARCH)' packaging/rpm/build.sh '$(PKG_STAGE)' '$(DIST)' '$(PKG_VERSION)'
	rpmlint -c packaging/rpm/rpmlint.toml '$(DIST)/xpu-cdi-$(PKG_VERSION)-1.$(RPM_ARCH).rpm'

packaging-test: ## Build, lint, install, remove and purge the packages (root; installs xpu-cdi on this host)
	go test -count=1 -v -timeout 20m ./tests/packaging/...
