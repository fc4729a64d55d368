# check and check_contains for the VM scripts (scenarios.sh, isolation.sh):
# each prints ok or FAIL and counts it in PASSED or FAILED.
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
