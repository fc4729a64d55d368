#!/usr/bin/env bash
# The scheduler at scale (issue 33): the real etcd, kube-apiserver,
# kube-scheduler and kube-controller-manager of cluster.sh, no kubelet and
# no containerd, and NODES simulated nodes run by kwok (pinned, installed
# with go install into the tools cache). Each node carries the ResourceSlices
# our driver would publish for a real fixture shape (tools/draslices
# -cluster: the driver's own code; the shapes mix 2 to 8 NUMA nodes and 80
# to 1,024 CPUs) and a NIC driver's devices with resource.kubernetes.io/numaNode.
# For each device model in MODELS, on a fresh cluster, tools/schedscale
# schedules PODS pods without claims, then PODS pods each with a claim for
# CPUS exclusive CPUs on a NIC's NUMA node, and checks the allocations.
# Each phase also reports the scheduler's queues from its /metrics (TRACE=1
# prints them every second) and its CPU time per pod.
#
#   NODES=500 PODS=3000 CPU_PODS=200 MODELS="numaNode cpu" bash test/k8s/scale.sh   (make scale-scheduler)
#
# One JSON line a phase goes to bin/scale-scheduler.jsonl (SCALE_OUT). With
# PROFILE=1, a CPU profile of the scheduler in each claims phase goes to
# bin/scale-scheduler-MODEL-NODES.pprof (go tool pprof -top reads it).
# Needs root on Linux only for cluster.sh's lock; no cgroup, no mount.
set -uo pipefail
source "$(dirname "$0")/cluster.sh"

NODES=${NODES:-20}
PODS=${PODS:-100}
# The cpu model's claims are scheduled at 1 to 2 pods/s here (100 to 500
# nodes; docs/performance.md): its phases make CPU_PODS pods, at most PODS.
CPU_PODS=${CPU_PODS:-300}
MODELS=${MODELS:-numaNode cpu}
CPUS=${CPUS:-2}
NICS=${NICS:-8}  # NIC devices (say, VFs) per NUMA node: a claim takes one
# How the claims come to be (schedscale -release): precreated (made before
# the pods, which name them) or template (the resourceclaim controller makes
# them from a template as the pods appear). precreated is the fair one for
# a phase released at once: with templates, every pod reaches the resumed
# scheduler before its claim and waits gated, and each claim's arrival
# re-checks all of them (docs/performance.md, "500 nodes").
RELEASE=${RELEASE:-precreated}
# The scheduler's and controller-manager's client QPS: their defaults (50
# and 20) would measure the client's rate limiter, not the scheduler; the
# upstream scheduler_perf runs unthrottled too.
SCHED_QPS=${SCHED_QPS:-5000}
KWOK_VERSION=v0.8.0
TOOLS_BIN=${TOOLS_BIN:-$CACHE/nri-cpupool-tools}
KWOK=$TOOLS_BIN/kwok-$KWOK_VERSION
OUT=${SCALE_OUT:-$REPO/bin/scale-scheduler.jsonl}
PIDS_kwok=""

# install_kwok: go install, pinned, into the tools cache (5 min on 2 cores
# the first time).
install_kwok() {
  [ -x "$KWOK" ] && return
  say "installing kwok $KWOK_VERSION into $TOOLS_BIN"
  mkdir -p "$TOOLS_BIN/.kwok"
  GOBIN=$TOOLS_BIN/.kwok GOFLAGS=-buildvcs=false go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" || die "go install kwok failed"
  mv "$TOOLS_BIN/.kwok/kwok" "$KWOK"
}

nodes_ready() {
  [ "$(kubectl get nodes -l type=kwok --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)" -ge "$NODES" ]
}

# wait_long WHAT SECONDS CMD...: wait_for with a longer limit.
wait_long() {
  local what=$1 secs=$2; shift 2
  for _ in $(seq 1 "$((secs * 2))"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "timed out waiting for $what"
}

stop_cluster() {
  stop_pids "$PIDS_kwok"
  PIDS_kwok=""
  teardown
}

scale_report() {
  [ -n "$W" ] || return 0
  local f
  for f in kwok scheduler controller-manager apiserver; do
    echo "---------- $f log (last 20 lines) ----------"
    tail -20 "$W/$f.log" 2>/dev/null
  done
}

# one_model MODEL: a fresh cluster with the model's slices, both phases.
one_model() {
  local model=$1 t0 profile=() pods=$PODS
  if [ "$model" = cpu ] && [ "$CPU_PODS" -lt "$PODS" ]; then pods=$CPU_PODS; fi
  W=$(mktemp -d /tmp/nri-cpupool-scale.XXXXXX)
  say "$model: $NODES kwok nodes in $W, $pods pods a phase, $CPUS CPUs and a NIC a claim"
  certs
  SCHEDULER_ARGS=(--kube-api-qps "$SCHED_QPS" --kube-api-burst "$SCHED_QPS")
  CONTROLLER_MANAGER_ARGS=(--kube-api-qps "$SCHED_QPS" --kube-api-burst "$SCHED_QPS")
  start_control_plane
  start_controller_manager resourceclaim-controller,garbage-collector-controller
  kubectl apply -f "$REPO/deploy/kubernetes/dra/deviceclasses.yaml" >/dev/null || die "applying the DeviceClasses"
  kubectl apply -f - >/dev/null <<YAML || die "the NIC driver's DeviceClass"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic}
spec: {selectors: [{cel: {expression: 'device.driver == "nic.example.com"'}}]}
YAML
  "$KWOK" --kubeconfig "$W/admin.kubeconfig" --config "$REPO/test/k8s/kwok.yaml" \
    --server-address "127.0.0.1:$(free_port)" >"$W/kwok.log" 2>&1 &
  PIDS_kwok=$!
  t0=$SECONDS
  "$REPO/bin/draslices" -cluster "$NODES" -devices "$model" -nics-per-numa "$NICS" > "$W/cluster.json" ||
    die "making the nodes' slices"
  kubectl create -f "$W/cluster.json" >/dev/null || die "creating the nodes and their slices"
  wait_long "$NODES Ready kwok nodes" 300 nodes_ready
  info "$NODES nodes with $(kubectl get resourceslices --no-headers | wc -l) ResourceSlices in $((SECONDS - t0)) s"
  # The scheduler's port: its /metrics for every phase, its profile on request.
  profile=(-scheduler-url "https://127.0.0.1:$SCHED_PORT" -cert "$W/pki/admin.crt" -key "$W/pki/admin.key")
  if [ "${PROFILE:-}" = 1 ]; then profile+=(-profile "$REPO/bin/scale-scheduler-$model-$NODES.pprof"); fi
  if [ "${TRACE:-}" = 1 ]; then profile+=(-trace); fi
  "$REPO/bin/schedscale" -kubeconfig "$W/admin.kubeconfig" -pods "$pods" -cpus "$CPUS" -model "$model" -release "$RELEASE" \
    -scheduler-pid "$PIDS_scheduler" "${profile[@]}" > "$W/phases.jsonl" || { cat "$W/phases.jsonl"; die "$model: the scale run failed"; }
  python3 - "$W/phases.jsonl" "$(date -u +%FT%TZ)" >> "$OUT" <<'PY' || die "recording the figures"
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    d["date"] = sys.argv[2]
    print(json.dumps(d))
PY
  cat "$W/phases.jsonl"
  stop_cluster
}

if [ "$(id -u)" != 0 ] || [ "$(uname -s)" != Linux ]; then die "needs root on Linux (the Kubernetes suites' lock)"; fi
exec 9>"$LOCK"
flock -n 9 || { say "another Kubernetes suite runs on this machine; waiting"; flock 9; }
on_exit() {
  local status=$?
  [ "$status" = 0 ] || scale_report
  stop_cluster
  exit "$status"
}
trap on_exit EXIT
KBIN=$(k8s_bin_dir)
export PATH="$KBIN:$PATH"
command -v openssl >/dev/null || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null; }
install_kwok
mkdir -p "$REPO/bin"
(cd "$REPO" && go build -o bin/draslices ./tools/draslices && go build -o bin/schedscale ./tools/schedscale) || die "building the tools"
for model in $MODELS; do one_model "$model"; done
say "figures: $OUT"
