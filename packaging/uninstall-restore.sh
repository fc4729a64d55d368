#!/bin/sh
# make uninstall's restore step: `INSTALLED restore-host`, the binary about
# to be removed, puts back the host files the plugin changed (see
# docs/install.md, "Removing it from a node"). Exit 0: go on with the
# removal; anything else: stop, nothing removed, so that it can be run
# again.
#
# A binary installed before restore-host existed answers "unknown command"
# (exit 2), and make uninstall would stop there for good.
# Then the tree's own build (TREE, bin/nri-cpupool) restores, when built:
# it reads the older build's journal. Without one the removal goes on with
# a warning: the files keep the plugin's values until the next reboot, and
# the originals stay in the journal.
#
# Usage: uninstall-restore.sh INSTALLED TREE
set -u
installed=$1 tree=$2
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
status=0
"$installed" restore-host 2>"$err" || status=$?
if [ "$status" -eq 2 ] && grep -q 'unknown command "restore-host"' "$err"; then
  if [ -x "$tree" ]; then
    echo "make uninstall: $installed predates restore-host; restoring with this tree's $tree" >&2
    "$tree" restore-host || {
      echo "make uninstall: $tree restore-host failed (above); nothing removed: fix it and run make uninstall again" >&2
      exit 1
    }
    exit 0
  fi
  echo "make uninstall: WARNING: $installed predates restore-host and $tree is not built: the host files the plugin" \
       "changed are NOT restored; they keep its values until the next reboot (the originals stay in the journal" \
       "host-originals.json beside its state file, which the removal keeps). To restore them: make build, then" \
       "$tree restore-host. Going on with the removal." >&2
  exit 0
fi
cat "$err" >&2
if [ "$status" -ne 0 ]; then
  echo "make uninstall: restore-host failed (above); nothing removed: fix it and run make uninstall again" >&2
  exit 1
fi
