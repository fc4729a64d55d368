#!/usr/bin/env bash
# make e2e: installs the runtimes (test/e2e/tools.sh, cached), then runs the Go
# end-to-end suite (build tag e2e) against each runtime in turn, timing each.
#   E2E_RUNTIMES   which to run (default: "containerd oldest crio")
#   E2E_RUN        a go test -run filter inside each runtime (e.g. ExclusivePool)
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ] || { echo "e2e: needs root on Linux"; exit 1; }
t0=$(date +%s)
envs=$(bash test/e2e/tools.sh) || { echo "e2e: installing the runtimes failed"; exit 1; }
eval "$envs"
echo "e2e: tools ready in $(( $(date +%s) - t0 )) s"
export E2E_PLUGIN=$PWD/bin/nri-cpupool
# The previous release, for the upgrade scenario: built once from git.
# NRI_CPUPOOL_PREVIOUS names it; 2a6c3c2 is the first release (before the
# state file's schema 2).
previous=${NRI_CPUPOOL_PREVIOUS:-2a6c3c2}
if commit=$(git rev-parse -q --verify "$previous^{commit}" 2>/dev/null); then
  prev_dir=${XDG_CACHE_HOME:-$HOME/.cache}/nri-cpupool-e2e/previous-$commit
  if ! [ -x "$prev_dir/nri-cpupool" ]; then
    echo "e2e: building the previous release $previous for the upgrade scenario (first run only)"
    src=$(mktemp -d)
    git archive "$commit" | tar -x -C "$src"
    (cd "$src" && GOFLAGS=-buildvcs=false go build -trimpath -o "$prev_dir.partial/nri-cpupool" ./cmd/nri-cpupool) &&
      rm -rf "$prev_dir" && mv "$prev_dir.partial" "$prev_dir"
    rm -rf "$src"
  fi
  [ -x "$prev_dir/nri-cpupool" ] && export E2E_PLUGIN_PREVIOUS=$prev_dir/nri-cpupool
else
  export E2E_PLUGIN_PREVIOUS_SKIP="the previous release $previous is not in this clone's history"
fi
declare -A TEST=([containerd]=TestContainerd [oldest]=TestContainerdOldest [crio]=TestCRIO)
rc=0
summary=""
for r in ${E2E_RUNTIMES:-containerd oldest crio}; do
  if [ "$r" = crio ] && [ -z "${E2E_CRIO:-}" ]; then
    echo "e2e: skipping CRI-O: ${E2E_CRIO_SKIP:-no binaries}"
    summary+="  crio: skipped (${E2E_CRIO_SKIP:-no binaries})"$'\n'
    continue
  fi
  if [ "$r" = oldest ] && [ -z "${E2E_CONTAINERD_OLD:-}" ]; then
    echo "e2e: skipping the oldest containerd (E2E_SKIP_OLD=1)"
    summary+="  oldest containerd: skipped"$'\n'
    continue
  fi
  t=$(date +%s)
  filter="^${TEST[$r]}\$${E2E_RUN:+/$E2E_RUN}"
  set +e
  go test -tags e2e -count=1 -timeout 12m -v -run "$filter" ./test/e2e 2>&1 | tee "bin/e2e-$r.log"
  status=${PIPESTATUS[0]}
  set -e
  [ "$status" = 0 ] || rc=1
  summary+="  $r: $([ "$status" = 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - t )) s (log: bin/e2e-$r.log)"$'\n'
done
echo "e2e summary (total $(( $(date +%s) - t0 )) s):"
printf '%s' "$summary"
exit $rc
