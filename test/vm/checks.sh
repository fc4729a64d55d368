# check and check_contains for the VM scripts (scenarios.sh, isolation.sh,
# reload.sh, systemd.sh): each prints ok or FAIL and counts it in PASSED or
# FAILED; within waits for a value.
# shellcheck shell=bash
PASSED=0 FAILED=0
check() { # check WHAT ACTUAL EXPECTED
  if [ "$2" = "$3" ]; then PASSED=$((PASSED + 1)); printf '  ok    %s (%s)\n' "$1" "$2"
  else FAILED=$((FAILED + 1)); printf '  FAIL  %s: got "%s", want "%s"\n' "$1" "$2" "$3"; fi
}
check_contains() { # check_contains WHAT TEXT NEEDLE
  case "$2" in *"$3"*) PASSED=$((PASSED + 1)); printf '  ok    %s\n' "$1" ;;
  *) FAILED=$((FAILED + 1)); printf '  FAIL  %s: "%s" does not contain "%s"\n' "$1" "$2" "$3" ;; esac
}
# within SECONDS WANT COMMAND...: COMMAND's output once it is WANT, or its
# last output after SECONDS (emulation is slow; a pass is ~100 ms on a node).
# A wait of more than 5 s is told on stderr: under emulation, where the
# time of a section goes.
within() {
  local t=$1 want=$2 got start=$SECONDS
  shift 2
  for _ in $(seq 1 $((t * 5))); do
    got=$("$@" 2>/dev/null)
    [ "$got" = "$want" ] && break
    sleep 0.2
  done
  [ $((SECONDS - start)) -le 5 ] || echo "    ($* took $((SECONDS - start)) s)" >&2
  echo "$got"
}
# settled SECONDS WANT COMMAND...: as within, but bounded by the clock:
# for a COMMAND that itself takes seconds under emulation (an audit), where
# within's count of tries would wait many times SECONDS.
settled() {
  local t=$1 want=$2 got start=$SECONDS
  shift 2
  while :; do
    got=$("$@" 2>/dev/null)
    [ "$got" = "$want" ] && break
    [ $((SECONDS - start)) -lt "$t" ] || break
    sleep 1
  done
  [ $((SECONDS - start)) -le 5 ] || echo "    ($* took $((SECONDS - start)) s)" >&2
  echo "$got"
}
