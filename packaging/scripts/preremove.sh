#!/bin/sh
# Before removal. Arguments:
#   deb: "remove" on removal, "upgrade" <new version> on an upgrade
#   rpm: <number of instances left after the transaction: 0 on removal>
# Stops and disables the service on removal only; an upgrade restarts it in
# postinstall instead. The state and the config stay.
set -e
removal=no
case "$1" in
  remove|deconfigure) removal=yes ;;
  0) removal=yes ;;
esac
if [ "$removal" = yes ] && [ -d /run/systemd/system ] && [ -z "${DPKG_ROOT:-}" ]; then
  systemctl disable --now nri-cpupool.service || true
fi
exit 0
