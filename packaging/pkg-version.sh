#!/bin/sh
# Print the package version (valid for both dpkg and rpm) for a version
# string such as "git describe" prints (default: this checkout's):
#   v1.2.3            -> 1.2.3
#   v1.2.3-4-gabcdef0 -> 1.2.3+4.gabcdef0   (sorts after 1.2.3)
#   v1.2.3-rc1        -> 1.2.3~rc1          (sorts before 1.2.3)
#   abcdef0 (no tag)  -> 0.0.0+git.abcdef0
# A "-dirty" suffix is dropped: packages are built from commits.
set -eu
v=${1:-}
if [ -z "$v" ]; then
	v=$(git -C "$(dirname "$0")" describe --tags --match 'v[0-9]*' --always 2>/dev/null || echo unknown)
fi
v=${v%-dirty}
v=${v#v}
if echo "$v" | grep -Eq '^[0-9]+(\.[0-9]+)+-[0-9]+-g[0-9a-f]+$|^[0-9]+(\.[0-9]+)+-.*-[0-9]+-g[0-9a-f]+$'; then
	echo "$v" | sed -E 's/^(.*)-([0-9]+)-(g[0-9a-f]+)$/\1+\2.\3/; s/-/~/g'
elif echo "$v" | grep -Eq '^[0-9]+(\.[0-9]+)+'; then
	echo "$v" | sed 's/-/~/g'
else
	echo "0.0.0+git.$(echo "$v" | tr -c 'A-Za-z0-9.\n' '.')"
fi
