#!/usr/bin/env bash
# Checks make uninstall's restore step as the Makefile runs it, without
# running make uninstall (with DESTDIR empty it would stop this machine's
# service and remove its files): the step is taken from `make -n
# uninstall` with PREFIX a temporary directory and BIN the tree's binary,
# and run against fake binaries. An installed binary that predates
# restore-host (it answers "unknown command", exit 2) must not stop the
# removal for good: the tree's build restores instead, or
# a warning says that nothing was restored.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() { # check NAME WANT_STATUS GOT_STATUS
  if [ "$2" = "$3" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1: exit $3, want $2"; cat "$work/err"; fi
}
has() { # has NAME FILE TEXT
  if grep -qF -- "$3" "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1: $2 lacks: $3"; cat "$2"; fi
}
lacks() {
  if grep -qF -- "$3" "$2"; then failed=$((failed + 1)); echo "FAIL: $1: $2 has: $3"; else passed=$((passed + 1)); fi
}

# fake NAME BEHAVIOUR: a binary that logs its arguments to $work/NAME.ran and
# behaves as new (restores, exit 0), fails (exit 1), old (a build without
# restore-host: unknown command, exit 2) or misuse (exit 2 otherwise).
fake() {
  mkdir -p "$(dirname "$1")"
  # shellcheck disable=SC2016 # the bodies' "$1" is the fake binary's own argument
  case $2 in
    new) body='echo "restored  /proc/irq/24/smp_affinity_list (irq): 0-15"; exit 0' ;;
    fails) body='echo "LEFT      x (irq): original 0-15: EIO"; echo "nri-cpupool restore-host: 1 host file not restored" >&2; exit 1' ;;
    old) body='printf "nri-cpupool: unknown command \"%s\"\n\nUsage: nri-cpupool COMMAND\n" "$1" >&2; exit 2' ;;
    misuse) body='echo "flag provided but not defined: -x" >&2; exit 2' ;;
  esac
  printf '#!/bin/sh\necho "$@" >> "%s.ran"\n%s\n' "$1" "$body" > "$1"
  chmod +x "$1"
}

# step PREFIX TREE: make uninstall's restore step, as make -n prints it.
step() {
  make --no-print-directory -n uninstall PREFIX="$1" BIN="$2" DESTDIR= |
    awk -v bin="$1/bin/nri-cpupool" 'index($0, "-x " bin) { on = 1 } on { print } on && /^fi$/ { exit }'
}

run() { # run CASE INSTALLED TREE(behaviour or none): status in $status, output in $work/out, $work/err
  local p=$work/$1 tree=$work/$1/tree/nri-cpupool
  fake "$p/bin/nri-cpupool" "$2"
  [ "$3" = none ] || fake "$tree" "$3"
  local s; s=$(step "$p" "$tree")
  [ -n "$s" ] || { failed=$((failed + 1)); echo "FAIL: $1: no restore step in make -n uninstall"; }
  status=0
  sh -c "$s" >"$work/out" 2>"$work/err" || status=$?
}

run current new none
check "installed build with restore-host" 0 "$status"
has "current" "$work/out" "restored  /proc/irq/24"

run failing fails new
check "restore-host fails: the removal stops" 1 "$status"
has "failing" "$work/err" "nothing removed"
if [ -e "$work/failing/tree/nri-cpupool.ran" ]; then failed=$((failed + 1)); echo "FAIL: failing: the tree's binary ran"; else passed=$((passed + 1)); fi

run old-with-tree old new
check "old installed build, tree built: the tree's restores" 0 "$status"
has "old-with-tree" "$work/old-with-tree/tree/nri-cpupool.ran" "restore-host"
has "old-with-tree" "$work/err" "predates restore-host"
has "old-with-tree" "$work/out" "restored  /proc/irq/24"
lacks "old-with-tree" "$work/err" "Usage:"

run old-tree-fails old fails
check "old installed build, the tree's restore fails: the removal stops" 1 "$status"
has "old-tree-fails" "$work/err" "nothing removed"

run old-no-tree old none
check "old installed build, no tree build: a warning, the removal goes on" 0 "$status"
has "old-no-tree" "$work/err" "NOT restored"
has "old-no-tree" "$work/err" "make build"

run misuse misuse new
check "exit 2 for another reason: the removal stops" 1 "$status"
has "misuse" "$work/err" "flag provided but not defined"

echo "uninstall: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
