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

.PHONY: deb rpm packaging-stage packaging-build-deps packaging-test

packaging-build-deps: ## Install the Debian packages that make deb/rpm need (root)
	packaging/install-build-deps.sh

packaging-stage:
	VERSION='$(VERSION)' COMMIT='$(COMMIT)' PREBUILT_BINDIR='$(PREBUILT_BINDIR)' \
		packaging/stage.sh '$(PKG_STAGE)'

deb: packaging-stage ## Build $(DIST)/xpu-cdi_<version>_<arch>.deb (dpkg-buildpackage) and run lintian
	COMMIT='$(COMMIT)' packaging/deb/build.sh '$(PKG_STAGE)' '$(DIST)' '$(PKG_VERSION)'
	lintian --fail-on error '$(DIST)/xpu-cdi_$(PKG_VERSION)_'*.deb

rpm: packaging-stage ## Build $(DIST)/xpu-cdi-<version>-1.<arch>.rpm (rpmbuild) and run rpmlint
	packaging/rpm/build.sh '$(PKG_STAGE)' '$(DIST)' '$(PKG_VERSION)'
	rpmlint -c packaging/rpm/rpmlint.toml '$(DIST)/xpu-cdi-$(PKG_VERSION)-1.'*.rpm

packaging-test: ## Build, lint, install, remove and purge the packages (root; installs xpu-cdi on this host)
	go test -count=1 -v -timeout 20m ./tests/packaging/...
