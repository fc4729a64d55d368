#!/usr/bin/env bash
# Checks that `make install` and `make deb` lay out what README "Install on a
# node" promises, and that the packaged config is valid on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
passed=0 failed=0
expect() { if "$@" >/dev/null 2>&1; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $*"; fi; }

make --no-print-directory install DESTDIR="$root" >/dev/null
for f in usr/local/bin/nri-cpupool etc/systemd/system/nri-cpupool.service etc/nri-cpupool/config.yaml \
         etc/containerd/conf.d/nri-cpupool.toml etc/crio/crio.conf.d/10-nri-cpupool.conf var/lib/nri-cpupool; do
  expect test -e "$root/$f"
done
expect "$root/usr/local/bin/nri-cpupool" validate --config "$root/etc/nri-cpupool/config.yaml"
echo "custom: keep me" > "$root/etc/nri-cpupool/config.yaml"
make --no-print-directory install DESTDIR="$root" >/dev/null
expect grep -q "keep me" "$root/etc/nri-cpupool/config.yaml"   # an operator's config survives reinstalls
expect grep -q "ExecStart=/usr/local/bin/nri-cpupool run --config /etc/nri-cpupool/config.yaml" "$root/etc/systemd/system/nri-cpupool.service"
if command -v dpkg-deb >/dev/null; then
  deb=$(make --no-print-directory deb | tail -1)
  contents=$(dpkg-deb -c "$deb")
  for f in ./usr/local/bin/nri-cpupool ./etc/systemd/system/nri-cpupool.service ./etc/nri-cpupool/config.yaml; do
    expect grep -qF "$f" <<<"$contents"
  done
  expect grep -qx "/etc/nri-cpupool/config.yaml" <(dpkg-deb -f "$deb" Package >/dev/null && dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)
  rm -f "$deb"
fi
echo "packaging: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
