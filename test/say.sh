# What the test scripts print: say (a step, bold on a terminal), info (an
# indented detail) and die. Shared by test/e2e/lib.sh (so `make demo`) and
# test/k8s/cluster.sh.
# shellcheck shell=bash

# want_color tells whether stdout takes ANSI colour: a terminal, not a dumb
# one, and NO_COLOR (https://no-color.org) unset or empty, as nri-cpupool's
# own --color=auto decides. A demo written to a file or a CI log reads
# plain (issue 43).
want_color() {
  [ -t 1 ] && [ -z "${NO_COLOR:-}" ] && [ "${TERM:-}" != dumb ]
}

if want_color; then
  say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
else
  say() { printf '==> %s\n' "$*"; }
fi
info() { printf '    %s\n' "$*"; }
die()  { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
