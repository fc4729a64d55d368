#!/usr/bin/env bash
# End-to-end suite: a real containerd 2.x with NRI, real runc and real cgroups,
# with bin/nri-cpupool as an external plugin. Asserts on the containers'
# cgroup cpusets and their processes' Cpus_allowed_list. Run as root:
#   make e2e
set -uo pipefail
source "$(dirname "$0")/lib.sh"

PASSED=0 FAILED=0
check() { # check WHAT ACTUAL EXPECTED
  if [ "$2" = "$3" ]; then PASSED=$((PASSED + 1)); printf '  ok    %s (%s)\n' "$1" "$2"
  else FAILED=$((FAILED + 1)); printf '  FAIL  %s: got "%s", want "%s"\n' "$1" "$2" "$3"; fi
}
check_contains() { # check_contains WHAT TEXT NEEDLE
  case "$2" in *"$3"*) PASSED=$((PASSED + 1)); printf '  ok    %s\n' "$1" ;;
  *) FAILED=$((FAILED + 1)); printf '  FAIL  %s: "%s" does not contain "%s"\n' "$1" "$2" "$3" ;; esac
}

finish() {
  local rc=$?
  if [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then report; fi
  teardown
  echo
  echo "e2e: $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ] && [ "$rc" -eq 0 ] || exit 1
}
trap finish EXIT

need_root_linux
install_tools
start_runtime
ONLINE=$(cat /sys/devices/system/cpu/online)
LAST=$(echo "$ONLINE" | tr ',' '\n' | tail -1 | sed 's/.*-//')
say "machine: CPUs $ONLINE; CPU $LAST plays the isolated CPU (no isolcpus on our machines)"

# ---------------------------------------------------------------- exclusive
cat > "$W/exclusive.yaml" <<YAML
isolatedCPUs: "$LAST"
pools:
  exclusive: {cpus: "$LAST"}
allowedNamespaces:
  exclusive: [telco]
metricsAddress: "127.0.0.1:${E2E_METRICS_PORT:-19464}"
YAML
INFRA=$(pool_of "$W/exclusive.yaml" infra)
say "phase 1: exclusive CPU $LAST, infra $INFRA"
start_plugin "$W/exclusive.yaml"

WEB=$(run_pod web default burstable) || die "run pod web"
WEB_APP=$(create_ctr "$WEB" web app 500) || die "create web/app"
check "infra container cpuset" "$(cpus_of "$WEB_APP")" "$INFRA"
check "infra container Cpus_allowed_list" "$(allowed_of "$WEB_APP")" "$INFRA"
check "web pause container pinned to infra" "$(cpus_of "$WEB")" "$INFRA"

DPDK=$(run_pod dpdk telco guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod dpdk"
FWD=$(create_ctr "$DPDK" dpdk fwd 1000) || die "create dpdk/fwd"
check "exclusive container cpuset" "$(cpus_of "$FWD")" "$LAST"
NODE=$(ls -d /sys/devices/system/cpu/cpu"$LAST"/node* 2>/dev/null | sed 's/.*node//' | head -1)
check "exclusive container cpuset.mems" "$(mems_of "$FWD")" "${NODE:-0}"
check "exclusive container Cpus_allowed_list" "$(allowed_of "$FWD")" "$LAST"
check "exclusive pod's pause container on infra" "$(cpus_of "$DPDK")" "$INFRA"
check "pause process Cpus_allowed_list" "$(allowed_of "$DPDK")" "$INFRA"
check "CPUPOOL_CPUS in the container" "$(crictl exec "$FWD" /bin/sh -c 'echo $CPUPOOL_CPUS:$CPUPOOL_POOL')" "$LAST:exclusive"

METRICS=$(exec 3<>"/dev/tcp/127.0.0.1/${E2E_METRICS_PORT:-19464}" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3)
check_contains "metrics: no free exclusive CPU" "$METRICS" 'cpupool_pool_free_cpus{pool="exclusive"} 0'
check_contains "metrics: one exclusive container" "$METRICS" 'cpupool_containers{pool="exclusive"} 1'

say "someone else (a static CPU manager) changes a pinned container's cpuset: the plugin keeps its own"
crictl update --cpuset-cpus "$ONLINE" "$FWD" >/dev/null 2>&1 || info "crictl update returned an error"
check "exclusive cpuset kept after an update" "$(cpus_of "$FWD")" "$LAST"
check_contains "the override is logged" "$(cat "$W/plugin.log")" "keeping CPUs $LAST (exclusive pool) instead of the requested $ONLINE"

say "pool full: a second exclusive pod fails, nothing else changes"
FULL=$(run_pod full telco guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod full"
OUT=$(create_ctr "$FULL" full c 1000 2>&1) && die "creating a container in a full pool succeeded: $OUT"
check_contains "full pool: the plugin's message reaches the user" "$OUT" "nri-cpupool: pool exclusive cannot fit container telco/full/c"
check "full pool: exclusive container unchanged" "$(cpus_of "$FWD")" "$LAST"
check "full pool: infra container unchanged" "$(cpus_of "$WEB_APP")" "$INFRA"
crictl rmp -f "$FULL" >/dev/null

say "bad annotations fail creation with a clear message"
BAD=$(run_pod bad telco guaranteed '{"pool.cpupool.dev": "turbo"}') || die "run pod bad"
OUT=$(create_ctr "$BAD" bad c 1000 2>&1) && die "a bad annotation was accepted: $OUT"
check_contains "unknown pool" "$OUT" 'unknown pool; use one of exclusive, shared, infra, exclusive-non-isolcpus'
crictl rmp -f "$BAD" >/dev/null
TENANT=$(run_pod tenant web guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod tenant"
OUT=$(create_ctr "$TENANT" tenant c 1000 2>&1) && die "an unauthorized namespace got exclusive CPUs: $OUT"
check_contains "namespace not allowed" "$OUT" 'may not use pool exclusive (allowedNamespaces.exclusive: [telco])'
crictl rmp -f "$TENANT" >/dev/null

say "kill -9 of the plugin and restart: no running container moves"
stop_plugin -KILL
start_plugin "$W/exclusive.yaml"
check "after plugin restart: exclusive" "$(cpus_of "$FWD")" "$LAST"
check "after plugin restart: infra" "$(cpus_of "$WEB_APP")" "$INFRA"
check "after plugin restart: state lists 2 containers" "$("$REPO/bin/nri-cpupool" status --state-file "$W/state/nri-cpupool.json" | tail -1)" "2 containers"

say "containerd restart: the plugin reconnects by itself, no container moves"
REG=$(log_count "registered with the runtime")
SYN=$(log_count "synchronized")
restart_containerd
wait_for_log "registered with the runtime" "$REG"
wait_for_log "synchronized" "$SYN"
check "plugin process survived the runtime restart" "$(kill -0 "$PLUGIN_PID" && echo alive)" "alive"
check "after containerd restart: exclusive" "$(cpus_of "$FWD")" "$LAST"
check "after containerd restart: infra" "$(cpus_of "$WEB_APP")" "$INFRA"
AFTER=$(run_pod after default besteffort) || die "run pod after"
AFTER_APP=$(create_ctr "$AFTER" after app 0) || die "create after/app"
check "after containerd restart: new containers are pinned" "$(cpus_of "$AFTER_APP")" "$INFRA"

say "corrupt state file at start: moved aside, rebuilt from the runtime"
stop_plugin -KILL
echo '{"schemaVersion": 1, "checksum": "sha256:0", "sta' > "$W/state/nri-cpupool.json"
start_plugin "$W/exclusive.yaml"
check "corrupt state kept for inspection" "$(ls "$W"/state/nri-cpupool.json.corrupt-* 2>/dev/null | wc -l)" "1"
check "after corrupt state: exclusive" "$(cpus_of "$FWD")" "$LAST"
check "after corrupt state: infra" "$(cpus_of "$WEB_APP")" "$INFRA"
check "after corrupt state: rebuilt state" "$("$REPO/bin/nri-cpupool" status --state-file "$W/state/nri-cpupool.json" | grep -c ' exclusive ')" "1"

say "pod removal returns its CPUs"
crictl stopp "$DPDK" >/dev/null && crictl rmp "$DPDK" >/dev/null
NEXT=$(run_pod next telco guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod next"
NEXT_C=$(create_ctr "$NEXT" next c 1000) || die "create next/c after the removal"
check "freed CPU handed out again" "$(cpus_of "$NEXT_C")" "$LAST"
crictl rmp -fa >/dev/null
stop_plugin

# ---------------------------------------------------------------- shared
cat > "$W/shared.yaml" <<YAML
isolatedCPUs: "$LAST"
pools:
  shared: {cpus: "$LAST"}
YAML
rm -f "$W"/state/nri-cpupool.json*
say "phase 2: shared CPU $LAST"
start_plugin "$W/shared.yaml"
SH=$(run_pod logs default burstable '{"pool.cpupool.dev": "shared"}') || die "run pod logs"
SH1=$(create_ctr "$SH" logs a 200) || die "create logs/a"
SH2=$(create_ctr "$SH" logs b 200) || die "create logs/b"
check "shared container a" "$(cpus_of "$SH1")" "$LAST"
check "shared container b shares it" "$(cpus_of "$SH2")" "$LAST"
check "shared pod's pause container on infra" "$(cpus_of "$SH")" "$(pool_of "$W/shared.yaml" infra)"
crictl rmp -fa >/dev/null
stop_plugin

# ---------------------------------------------------------------- exclusive-non-isolcpus
RESERVED=$(pool_of "$W/shared.yaml" infra)
cat > "$W/eni.yaml" <<YAML
reservedCPUs: "$RESERVED"
pools:
  exclusive-non-isolcpus: {enabled: true}
YAML
rm -f "$W"/state/nri-cpupool.json*
say "phase 3: exclusive-non-isolcpus lends CPU $LAST out of infra $ONLINE"
start_plugin "$W/eni.yaml"
WEB3=$(run_pod web3 default burstable) || die "run pod web3"
WEB3_APP=$(create_ctr "$WEB3" web3 app 500) || die "create web3/app"
check "infra before" "$(cpus_of "$WEB3_APP")" "$ONLINE"
ENI=$(run_pod eni telco guaranteed '{"pool.cpupool.dev": "exclusive-non-isolcpus"}') || die "run pod eni"
ENI_C=$(create_ctr "$ENI" eni c 1000) || die "create eni/c"
check "exclusive-non-isolcpus container" "$(cpus_of "$ENI_C")" "$LAST"
check "infra container followed the shrink" "$(cpus_of "$WEB3_APP")" "$RESERVED"
check "infra process followed the shrink" "$(allowed_of "$WEB3_APP")" "$RESERVED"
check "infra pause container followed the shrink" "$(cpus_of "$WEB3")" "$RESERVED"
crictl stopp "$ENI" >/dev/null && crictl rmp "$ENI" >/dev/null
check "infra grows back after the removal" "$(wait_cpus "$WEB3_APP" "$ONLINE")" "$ONLINE"
check "infra pause container grows back" "$(cpus_of "$WEB3")" "$ONLINE"
check "plugin peak RSS under 40 MiB" "$(awk '/VmHWM/ {print ($2 < 40960) ? "yes" : "no: " $2 " kB"}' "/proc/$PLUGIN_PID/status")" "yes"

# ---------------------------------------------------------------- a pod's life
crictl rmp -fa >/dev/null
stop_plugin
rm -f "$W"/state/nri-cpupool.json*
say "phase 4: exclusive CPUs belong to the pod's life (exclusive CPU $LAST)"
start_plugin "$W/exclusive.yaml"
STATUS="$REPO/bin/nri-cpupool status --state-file $W/state/nri-cpupool.json"

say "an exclusive init container completes, then the pod's exclusive app container runs on its CPU"
JOB=$(run_pod job telco guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod job"
HELD=$(log_count "held for its pod") # before the create: the container may exit at once
INIT=$(create_ctr "$JOB" job init 1000 0 '["/bin/sh", "-c", "exit 0"]') || die "create job/init"
check "init container ran on the exclusive CPU" "$(spec_cpus_of "$INIT")" "$LAST"
wait_exited "$INIT"
wait_for_log "held for its pod" "$HELD"
check_contains "status: the init container's CPU is held" "$($STATUS)" "HELD FOR STOPPED CONTAINERS"
OTHER=$(run_pod other telco guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod other"
OUT=$(create_ctr "$OTHER" other c 1000 2>&1) && die "another pod took the CPU of the pod's init container: $OUT"
check_contains "another pod is refused between the init and the app container" "$OUT" "pool exclusive cannot fit container telco/other/c"
APP=$(create_ctr "$JOB" job app 1000) || die "create job/app after its init container"
check "app container reuses the init container's CPU" "$(cpus_of "$APP")" "$LAST"
check "app container Cpus_allowed_list" "$(allowed_of "$APP")" "$LAST"
check "app container runs" "$(state_of "$APP")" "CONTAINER_RUNNING"
crictl stopp "$JOB" >/dev/null && crictl rmp "$JOB" >/dev/null

say "crash loop: the container exits and is re-created (same pod, same name, attempt+1); another pod asking for its CPU is refused"
CRASH=$(run_pod crash telco guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod crash"
FAILING='["/bin/sh", "-c", "exit 3"]'
HELD=$(log_count "held for its pod") # before the create: the container may exit at once
C=$(create_ctr "$CRASH" crash app 1000 0 "$FAILING") || die "create crash/app attempt 0"
for ATTEMPT in 1 2 3; do
  wait_exited "$C"
  wait_for_log "held for its pod" "$HELD"
  OUT=$(create_ctr "$OTHER" other c 1000 "$ATTEMPT" 2>&1) && die "another pod took the CPU of a crash-looping container: $OUT"
  check_contains "attempt $ATTEMPT: another pod is refused during the back-off" "$OUT" "pool exclusive cannot fit container telco/other/c"
  if [ "$ATTEMPT" = 2 ]; then
    say "kill -9 of the plugin while the container is down: the hold survives"
    stop_plugin -KILL
    start_plugin "$W/exclusive.yaml"
    check_contains "status after the restart: held for the stopped container" "$($STATUS)" "1 stopped holding CPUs"
    OUT=$(create_ctr "$OTHER" other c 1000 9 2>&1) && die "another pod took the CPU after a plugin restart: $OUT"
    check_contains "after the plugin restart: another pod is still refused" "$OUT" "pool exclusive cannot fit"
  fi
  CMD=$FAILING; [ "$ATTEMPT" = 3 ] && CMD='["/bin/sleep", "inf"]'
  HELD=$(log_count "held for its pod")
  C=$(create_ctr "$CRASH" crash app 1000 "$ATTEMPT" "$CMD") || die "re-create crash/app attempt $ATTEMPT"
  check "attempt $ATTEMPT gets its CPU" "$(spec_cpus_of "$C")" "$LAST"
done
check "the last attempt runs on its CPU" "$(allowed_of "$C")" "$LAST"
METRICS=$(exec 3<>"/dev/tcp/127.0.0.1/${E2E_METRICS_PORT:-19464}" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3)
check_contains "metrics: nothing held while it runs" "$METRICS" 'cpupool_held_cpus{pool="exclusive"} 0'

say "the pod's sandbox stops: its CPU is released"
crictl stop "$C" >/dev/null
check_contains "stopped by the kubelet: still held" "$($STATUS)" "1 stopped holding CPUs"
crictl stopp "$CRASH" >/dev/null
check "status: nothing held after the sandbox stopped" "$($STATUS | tail -1)" "0 containers"
O=$(create_ctr "$OTHER" other c 1000 10) || die "create other/c after the crash pod stopped"
check "the other pod gets the CPU" "$(cpus_of "$O")" "$LAST"
crictl rmp -fa >/dev/null
crictl rmp -fa >/dev/null
stop_plugin

# ---------------------------------------------------------------- in-place resize and CPU quota
cat > "$W/resize.yaml" <<YAML
isolatedCPUs: "$LAST"
pools:
  exclusive: {cpus: "$LAST"}
metricsAddress: "127.0.0.1:${E2E_METRICS_PORT:-19464}"
YAML
rm -f "$W"/state/nri-cpupool.json*
say "phase 5: in-place resize through crictl update (the kubelet's CRI call) and the CFS quota of exclusive CPU $LAST"
start_plugin "$W/resize.yaml"
RZ=$(run_pod rz default guaranteed '{"pool.cpupool.dev/container.fwd": "exclusive"}') || die "run pod rz"
RZ_FWD=$(create_ctr "$RZ" rz fwd 1000) || die "create rz/fwd"
RZ_APP=$(create_ctr "$RZ" rz app 500) || die "create rz/app"
RZ_INFRA=$(cpus_of "$RZ_APP")
check "exclusive container" "$(cpus_of "$RZ_FWD")" "$LAST"
check "no CFS quota on exclusive CPUs" "$(quota_of "$RZ_FWD")" "-1"
check "infra container keeps the kubelet's quota" "$(quota_of "$RZ_APP")" "50000"

say "grow past the pool: refused with the plugin's message, nothing changes"
OUT=$(crictl update --cpu-share 2048 --cpu-quota 200000 --cpu-period 100000 "$RZ_FWD" 2>&1) && die "growing past the pool succeeded: $OUT"
check_contains "grow refused, the message reaches the user" "$OUT" \
  "nri-cpupool: pool exclusive cannot fit container default/rz/fwd grown from 1 to 2 CPUs: it asks for 1 more CPUs, but only 0 of the pool's 1 CPUs are free"
check "refused grow: cpuset unchanged" "$(cpus_of "$RZ_FWD")" "$LAST"
check "refused grow: still no quota" "$(quota_of "$RZ_FWD")" "-1"
check "refused grow: the state keeps the request" "$(request_of fwd)" "1000m"

say "a resize within the same whole CPU, and of an infra container"
crictl update --cpu-share 512 --cpu-quota 50000 --cpu-period 100000 "$RZ_FWD" >/dev/null || die "resize rz/fwd to 500m"
check "500m: still one exclusive CPU" "$(cpus_of "$RZ_FWD")" "$LAST"
check "500m: the kubelet's quota is lifted again" "$(quota_of "$RZ_FWD")" "-1"
check "500m: the state records the request" "$(request_of fwd)" "500m"
crictl update --cpu-share 1024 --cpu-quota 100000 --cpu-period 100000 "$RZ_APP" >/dev/null || die "resize rz/app"
check "infra resize: cpuset unchanged" "$(cpus_of "$RZ_APP")" "$RZ_INFRA"
check "infra resize: the kubelet's quota applies" "$(quota_of "$RZ_APP")" "100000"
check "infra resize: the state records the request" "$(request_of app)" "1000m"
METRICS=$(metrics)
check_contains "metrics: the refused resize" "$METRICS" 'cpupool_resizes_total{pool="exclusive",result="refused"} 1'
check_contains "metrics: the resize within one CPU" "$METRICS" 'cpupool_resizes_total{pool="exclusive",result="unchanged"} 1'
check_contains "metrics: the infra resize" "$METRICS" 'cpupool_resizes_total{pool="infra",result="unchanged"} 1'
