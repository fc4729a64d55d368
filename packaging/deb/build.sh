#!/usr/bin/env bash
# Builds bin/nri-cpupool_<version>_<arch>.deb from the built binary with dpkg-deb.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=${1:-dev}
version=${version#v}
[[ $version =~ ^[0-9] ]] || version="0.0.0~${version}"
arch=$(dpkg --print-architecture 2>/dev/null || go env GOARCH)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
make --no-print-directory install DESTDIR="$root" PREFIX=/usr/local >/dev/null
install -D -m 0644 README.md "$root/usr/share/doc/nri-cpupool/README.md"
mkdir -p "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: nri-cpupool
Version: ${version}
Architecture: ${arch}
Maintainer: nri-cpupool developers
Section: admin
Priority: optional
Description: CPU pools and NUMA-aware CPU pinning for Kubernetes, as an NRI plugin
 Exclusive, shared, infra and exclusive-non-isolcpus pools for containerd 2.x and
 CRI-O, with NUMA-, core- and cache-aligned placement and durable state.
CONTROL
echo /etc/nri-cpupool/config.yaml > "$root/DEBIAN/conffiles"
cat > "$root/DEBIAN/postinst" <<'POST'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
echo "nri-cpupool installed: edit /etc/nri-cpupool/config.yaml, run 'nri-cpupool validate', then 'systemctl enable --now nri-cpupool'"
POST
chmod 0755 "$root/DEBIAN/postinst"
out="bin/nri-cpupool_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$out" >/dev/null
echo "$out"
