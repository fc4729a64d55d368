#!/usr/bin/env bash
# Prints the version of the checkout in the current directory, for the
# binaries (`nri-cpupool version`) and the packages (make package), in a
# form dpkg and rpm order by age, which a bare commit hash (538d4e5) is not:
#   a tag (v1.2.3) on HEAD:          1.2.3
#   commits after the last tag:      1.2.3+git<YYYYMMDDHHMMSS>.<hash>  (after 1.2.3, before 1.2.4)
#   no tag:                          0.0.0~git<YYYYMMDDHHMMSS>.<hash>  (before any release)
# <YYYYMMDDHHMMSS> is HEAD's commit date in UTC, <hash> its abbreviated
# hash; uncommitted changes add .dirty. Outside a git checkout: dev.
# The Makefile's VERSION= overrides it (docs/install.md).
set -euo pipefail
git rev-parse --git-dir >/dev/null 2>&1 || { echo dev; exit 0; }
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)
hash=$(git rev-parse --short HEAD)
dirty=""
git diff --quiet HEAD 2>/dev/null || dirty=.dirty
if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
  base=${tag#v}
  base=${base//-/\~} # v1.3.0-rc1: 1.3.0~rc1, before 1.3.0 in dpkg and rpm
  if [ "$(git rev-list -n 1 "$tag")" = "$(git rev-parse HEAD)" ]; then
    echo "${base}${dirty}"
  else
    echo "${base}+git${date}.${hash}${dirty}"
  fi
else
  echo "0.0.0~git${date}.${hash}${dirty}"
fi
