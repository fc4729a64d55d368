#!/bin/sh
# After removal (or the old version's removal during an upgrade): let systemd
# forget the unit. The state in /var/lib/nri-cpupool and the config stay;
# `dpkg --purge` removes the conffiles, as the operator asked.
set -e
if [ -d /run/systemd/system ] && [ -z "${DPKG_ROOT:-}" ]; then
  systemctl daemon-reload || true
fi
exit 0
