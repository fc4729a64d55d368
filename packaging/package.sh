#!/usr/bin/env bash
# Builds bin/nri-cpupool_<version>_<arch>.deb and bin/nri-cpupool-<version>-1.<arch>.rpm
# from packaging/nfpm.yaml (one recipe for both) and the built binaries.
# Usage: package.sh VERSION [deb|rpm ...]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
NFPM=${NFPM:-nfpm}
raw=${1:-dev}; shift || true
formats=("$@"); [ ${#formats[@]} -gt 0 ] || formats=(deb rpm)
# git describe gives v1.2.3, v1.2.3-4-gabcdef, abcdef or abcdef-dirty. Both
# formats need a version that starts with a digit; rpm forbids '-'.
version=${raw#v}
version=${version//-/.}
[[ $version =~ ^[0-9] ]] || version="0.0.0~${version}"
export VERSION=$version ARCH=${ARCH:-$(go env GOARCH)}
for b in bin/nri-cpupool bin/nri-cpupool-dra; do
  [ -x "$b" ] || { echo "package.sh: build $b first (make build)" >&2; exit 1; }
done
for f in "${formats[@]}"; do
  case $f in
    deb) out="bin/nri-cpupool_${VERSION}_${ARCH}.deb" ;;
    rpm)
      case $ARCH in amd64) rpmarch=x86_64 ;; arm64) rpmarch=aarch64 ;; *) rpmarch=$ARCH ;; esac
      out="bin/nri-cpupool-${VERSION}-1.${rpmarch}.rpm" ;;
    *) echo "package.sh: unknown format $f (deb or rpm)" >&2; exit 2 ;;
  esac
  rm -f "$out"
  "$NFPM" package --config packaging/nfpm.yaml --packager "$f" --target "$out" >/dev/null
  echo "$out"
done
