// Package packaging tests the xpu-cdi .deb and .rpm end to end: it builds
// them with the same make targets as a release (packaging/packaging.mk),
// lints them, installs the .deb on this host with dpkg and the .rpm into a
// temporary root, runs the installed refresh command on a fake Kunlun host,
// runs the maintainer scripts without systemd, and removes and purges the
// .deb, checking that nothing is left.
//
// The tests install and remove a real package, so they need root and skip
// without it. A missing tool (dpkg-buildpackage, lintian, rpmbuild, rpmlint,
// systemd-analyze) skips the test on a developer's machine and fails it when
// CI=true: packaging/install-build-deps.sh installs them.
//
// An installation of xpu-cdi that these tests did not make is never
// touched: the tests refuse to run beside it. One they made and could not
// purge (the test binary was killed, so no cleanup ran) is recognised by
// /var/lib/xpu-cdi-tests/deb-installed and purged by the next run.
package packaging
