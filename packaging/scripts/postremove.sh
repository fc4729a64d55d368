#!/bin/sh
# After removal (or the old version's removal during an upgrade): let systemd
# forget the unit. The state in /var/lib/nri-cpupool and the config stay;
# `dpkg --purge` removes the conffiles, as the operator asked.
set -e
removal=no
case "$1" in
  remove|purge|0) removal=yes ;;
esac
if [ -d /run/systemd/system ] && [ -z "${DPKG_ROOT:-}" ]; then
  systemctl daemon-reload || true
fi
if [ "$removal" = yes ]; then
  # rpm's erase saves an edited drop-in as .rpmsave (see postinstall, which
  # says it at an install or upgrade).
  for f in /etc/crio/crio.conf.d/10-nri-cpupool.conf.dpkg-old /etc/crio/crio.conf.d/10-nri-cpupool.conf.dpkg-dist \
           /etc/crio/crio.conf.d/10-nri-cpupool.conf.dpkg-new /etc/crio/crio.conf.d/10-nri-cpupool.conf.rpmnew \
           /etc/crio/crio.conf.d/10-nri-cpupool.conf.rpmsave; do
    if [ -e "${DPKG_ROOT:-}$f" ]; then
      echo "nri-cpupool: WARNING: $f is left over from the package manager's configuration file handling;" \
           "CRI-O reads every file in /etc/crio/crio.conf.d whatever its name, so its settings still apply." \
           "Delete it and restart CRI-O (systemctl restart crio)." >&2
    fi
  done
fi
exit 0
