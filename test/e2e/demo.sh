#!/usr/bin/env bash
# make demo: builds nri-cpupool, brings up a private containerd with it, runs
# example pods in each pool and shows where they landed, read back from the
# kernel's cgroups. KEEP=1 leaves it running and prints how to use it.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

finish() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then report; fi
  if [ "${KEEP:-0}" = 1 ] && [ "$rc" -eq 0 ]; then
    cat > "$W/stop.sh" <<STOP
#!/usr/bin/env bash
# Stops the demo started by make demo KEEP=1.
source "$REPO/test/e2e/lib.sh"
W="$W" CONTAINERD_PID="$CONTAINERD_PID" PLUGIN_PID="$PLUGIN_PID" CGROUP_TOP="$CGROUP_TOP" CGROUP_PARENT="$CGROUP_PARENT"
export PATH="$TOOLS:\$PATH" CRI_CONFIG_FILE="$W/crictl.yaml"
teardown
echo "demo stopped"
STOP
    chmod +x "$W/stop.sh"
    say "left running (KEEP=1). Talk to it with:"
    info "export PATH=$TOOLS:\$PATH CRI_CONFIG_FILE=$W/crictl.yaml"
    info "crictl pods; crictl ps"
    info "$REPO/bin/nri-cpupool status --state-file $W/state/nri-cpupool.json     # --map draws it"
    info "tail -f $W/plugin.log        # the plugin's decisions"
    info "pod and container specs to copy: $W/pod-*.json $W/ctr-*.json"
    info "stop everything: $W/stop.sh"
    return
  fi
  teardown
  [ "$rc" -eq 0 ] && say "demo finished and cleaned up (KEEP=1 keeps it running)"
}
trap finish EXIT

need_root_linux
say "building nri-cpupool"
(cd "$REPO" && make --no-print-directory build >/dev/null) || die "build failed"
install_tools
say "starting a private containerd $CONTAINERD_VERSION with NRI (all state in a temporary directory)"
start_runtime

# A default that fits any machine: CPU 0's core stays infra (reserved), the
# rest is declared isolated (our machines have no isolcpus), a quarter of it
# shared, the remainder exclusive.
expand() { local r a b; for r in ${1//,/ }; do a=${r%-*}; b=${r#*-}; seq "$a" "$b"; done; }
ONLINE=$(cat /sys/devices/system/cpu/online)
RESERVED=$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null || echo 0)
ISOLATED=$(comm -23 <(expand "$ONLINE" | sort) <(expand "$RESERVED" | sort) | sort -n | paste -sd, -)
NISO=$(echo "$ISOLATED" | tr ',' '\n' | grep -c .)
NSHARED=$(( NISO / 4 ))
[ "$NISO" -ge 2 ] && [ "$NSHARED" -eq 0 ] && NSHARED=1
cat > "$W/demo.yaml" <<YAML
# Written by make demo for this machine ($ONLINE).
isolatedCPUs: "$ISOLATED"
reservedCPUs: "$RESERVED"
pools:
  shared: {count: $NSHARED}
YAML
say "configuration ($W/demo.yaml):"
sed 's/^/    /' "$W/demo.yaml"
"$REPO/bin/nri-cpupool" validate --config "$W/demo.yaml" | sed 's/^/    /'
start_plugin "$W/demo.yaml"
say "nri-cpupool is running as an NRI plugin (pid $PLUGIN_PID)"

NEXCL=$(pool_of "$W/demo.yaml" exclusive | tr ',' '\n' | awk -F- '{n += (NF == 2 ? $2 - $1 + 1 : 1)} END {print n + 0}')
EXCL_REQ=1000
[ "$NEXCL" -ge 3 ] && EXCL_REQ=2000
PODS=()
say "running example pods"
DPDK=$(run_pod dpdk telco guaranteed '{"pool.cpupool.dev": "exclusive"}') && \
  create_ctr "$DPDK" dpdk fwd "$EXCL_REQ" >/dev/null && PODS+=(dpdk) && info "dpdk/fwd: exclusive, requests $((EXCL_REQ / 1000)) CPU(s)"
if [ "$NSHARED" -gt 0 ]; then
  LOGS=$(run_pod logs default burstable '{"pool.cpupool.dev": "shared"}') && \
    create_ctr "$LOGS" logs agent 200 >/dev/null && PODS+=(logs) && info "logs/agent: shared"
else
  info "logs/agent: skipped — a shared pool needs at least 3 CPUs, this machine has $(expand "$ONLINE" | wc -l)"
fi
WEB=$(run_pod web default burstable) && create_ctr "$WEB" web app 500 >/dev/null && PODS+=(web) && info "web/app: no annotation, infra"
NIC=""
for f in /sys/class/net/*/device/numa_node; do
  [ -e "$f" ] && [ "$(cat "$f")" -ge 0 ] 2>/dev/null && { NIC=$(basename "$(dirname "$(dirname "$f")")"); break; }
done
if [ -n "$NIC" ] && [ "$NEXCL" -ge 2 ]; then
  ALIGNED=$(run_pod nic telco guaranteed "{\"pool.cpupool.dev\": \"exclusive\", \"device.cpupool.dev\": \"/sys/class/net/$NIC\"}") && \
    create_ctr "$ALIGNED" nic rx 1000 >/dev/null && PODS+=(nic) && info "nic/rx: exclusive, aligned to $NIC (NUMA node $(cat "/sys/class/net/$NIC/device/numa_node"))"
else
  info "nic/rx: skipped — no network device here reports a NUMA node (or no exclusive CPU left)"
fi

say "where everything runs (read back from the kernel)"
{
  printf 'POD/CONTAINER\tPOOL\tCGROUP cpuset.cpus\tcpuset.mems\tCpus_allowed_list\n'
  STATE="$W/state/nri-cpupool.json"
  for pod in "${PODS[@]}"; do
    pid=$(crictl pods --name "^$pod\$" -q | head -1)
    printf '%s/(pause)\tinfra\t%s\t%s\t%s\n' "$pod" "$(cpus_of "$pid")" "$(mems_of "$pid")" "$(allowed_of "$pid")"
    for c in $(crictl ps --pod "$pid" -q); do
      name=$(crictl inspect -o go-template --template '{{.status.metadata.name}}' "$c")
      pool=$("$REPO/bin/nri-cpupool" status --state-file "$STATE" | awk -v p="$pod" -v c="$name" '$2 == p && $3 == c {print $4}')
      printf '%s/%s\t%s\t%s\t%s\t%s\n' "$pod" "$name" "$pool" "$(cpus_of "$c")" "$(mems_of "$c")" "$(allowed_of "$c")"
    done
  done
} | column -t -s $'\t' | sed 's/^/    /'
say "nri-cpupool status"
"$REPO/bin/nri-cpupool" status --state-file "$W/state/nri-cpupool.json" | sed 's/^/    /'
# The map goes through sed too, so it cannot see the terminal: colour is
# decided here, as the map would decide it (want_color: NO_COLOR, a terminal).
MAP_COLOR=never
want_color && MAP_COLOR=always
say "nri-cpupool status --map (this machine, with each CPU's pool and owner)"
"$REPO/bin/nri-cpupool" status --map --color "$MAP_COLOR" --state-file "$W/state/nri-cpupool.json" | sed 's/^/    /'
info "plugin peak RSS: $(awk '/VmHWM/ {print $2 " kB"}' "/proc/$PLUGIN_PID/status")"
