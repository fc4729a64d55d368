# Checks and pod helpers the Kubernetes suites share (run.sh, dra.sh), on
# top of cluster.sh. Sourcing it installs the EXIT trap that reports and
# tears the cluster down.
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
finish() {
  local rc=$?
  if [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then report; fi
  teardown
  echo
  echo "k8s e2e: $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ] && [ "$rc" -eq 0 ] || exit 1
}
trap finish EXIT

running() { kubectl wait --for=jsonpath='{.status.phase}'=Running "pod/$1" --timeout=90s >/dev/null || die "pod $1 is not Running: $(kubectl get pod "$1" -o jsonpath='{.status}')"; }
waiting_message() { # POD: the container's waiting reason and message, once it has one
  local m
  for _ in $(seq 1 150); do
    m=$(kubectl get pod "$1" -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}: {.status.containerStatuses[0].state.waiting.message}' 2>/dev/null)
    case $m in CreateContainerError:*|RunContainerError:*) echo "$m"; return ;; esac
    sleep 0.4
  done
  echo "$m"
}
delete_pods() { kubectl delete pod "$@" --wait=true --timeout=90s >/dev/null 2>&1 || die "deleting $*"; }
uid_of() { kubectl get pod "$1" -o jsonpath='{.metadata.uid}'; }
ctr_of() { crictl ps -q --label "io.kubernetes.pod.name=$1" --label io.kubernetes.container.name=app | head -1; }
sandbox_of() { crictl pods -q --name "^$1\$" --state ready | head -1; }
cgroup_path() { # ID: the cgroupsPath the kubelet asked for (container or sandbox)
  crictl inspect -o go-template --template '{{.info.runtimeSpec.linux.cgroupsPath}}' "$1" 2>/dev/null ||
    crictl inspectp -o go-template --template '{{.info.runtimeSpec.linux.cgroupsPath}}' "$1"
}
cpuset_of() { cat "$CGROUP_FS/cpuset$(cgroup_path "$1")/cpuset.cpus"; }
# quota_of ID: the container's CFS quota in microseconds, -1 for none:
# cpu.cfs_quota_us on cgroup v1, the first field of cpu.max on v2.
quota_of() {
  if [ -f "$CGROUP_FS/cgroup.controllers" ]; then awk '{print ($1 == "max") ? -1 : $1}' "$CGROUP_FS$(cgroup_path "$1")/cpu.max"
  else cat "$CGROUP_FS/cpu$(cgroup_path "$1")/cpu.cfs_quota_us"; fi
}
# pod_quota_of ID: the CFS quota of the container's pod cgroup, the parent of
# its cgroup (this cluster's cgroupfs driver), as quota_of says it. The
# kubelet sets it to the sum of the pod's CPU limits.
pod_quota_of() {
  local parent
  parent=$(dirname "$(cgroup_path "$1")")
  if [ -f "$CGROUP_FS/cgroup.controllers" ]; then awk '{print ($1 == "max") ? -1 : $1}' "$CGROUP_FS$parent/cpu.max"
  else cat "$CGROUP_FS/cpu$parent/cpu.cfs_quota_us"; fi
}
env_of() { crictl inspect -o go-template --template '{{range .info.runtimeSpec.process.env}}{{println .}}{{end}}' "$1"; }
# The machine's CPUs: the last one is the suites' exclusive pool, the rest
# infra.
ONLINE=$(cat /sys/devices/system/cpu/online)
LAST=$(echo "$ONLINE" | tr ',' '\n' | tail -1 | sed 's/.*-//')
INFRA=0
[ "$LAST" = 1 ] || INFRA=0-$((LAST - 1))


# pod NAME [--annotation K=V] [--env K=V] [--request cpu=X] [--limit R=X]
#     [--claim-template T] [--claim C] [--node N]...:
# a host-network busybox pod with one container "app"; --claim-template and
# --claim give it a ResourceClaim (from a template, or an existing one),
# --node a node selector.
pod() {
  local name=$1 ann="" env="" req="" lim="" claims="" uses="" sel=""; shift
  while [ $# -gt 0 ]; do
    case $1 in
      --annotation) ann="$ann    ${2%%=*}: \"${2#*=}\""$'\n' ;;
      --env) env="$env      - {name: ${2%%=*}, value: \"${2#*=}\"}"$'\n' ;;
      --request) req="$req          ${2%%=*}: \"${2#*=}\""$'\n' ;;
      --limit) lim="$lim          ${2%%=*}: \"${2#*=}\""$'\n' ;;
      --claim-template) claims="  resourceClaims: [{name: dev, resourceClaimTemplateName: $2}]"; uses="      claims: [{name: dev}]" ;;
      --claim) claims="  resourceClaims: [{name: dev, resourceClaimName: $2}]"; uses="      claims: [{name: dev}]" ;;
      --node) sel="  nodeSelector: {kubernetes.io/hostname: $2}" ;;
    esac
    shift 2
  done
  kubectl apply -f - >/dev/null <<YAML || die "creating pod $name"
apiVersion: v1
kind: Pod
metadata:
  name: $name
  annotations:
    e2e: "yes"
$ann
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 0
$claims
$sel
  containers:
  - name: app
    image: $IMAGE
    imagePullPolicy: Never
    command: ["/bin/sleep", "inf"]
    env:
      - {name: E2E, value: "yes"}
$env
    resources:
      requests:
$req
      limits:
$lim
$uses
YAML
}

node_res() { kubectl get node localhost -o jsonpath="{.status.$1.${2//./\\.}}"; }

# assert_pinned POD QOS CPUS: the container and its pause container run
# where nri-cpupool put them, in the kubelet's cgroup of the pod's QoS class.
assert_pinned() {
  local pod=$1 qos=$2 want=$3 ctr sb parent uid
  running "$pod"
  ctr=$(ctr_of "$pod"); sb=$(sandbox_of "$pod"); uid=$(uid_of "$pod")
  parent="$KUBE_CGROUP_ROOT/kubepods/$qos/pod$uid"
  [ "$qos" = guaranteed ] && parent="$KUBE_CGROUP_ROOT/kubepods/pod$uid"
  check "$pod: container cgroup under the kubelet's $qos pod cgroup" "$(dirname "$(cgroup_path "$ctr")")" "$parent"
  check "$pod: container cpuset" "$(cpuset_of "$ctr")" "$want"
  check "$pod: pause container cgroup" "$(dirname "$(cgroup_path "$sb")")" "$parent"
  check "$pod: pause container cpuset (infra)" "$(cpuset_of "$sb")" "$INFRA"
  check "$pod: QoS class" "$(kubectl get pod "$pod" -o jsonpath='{.status.qosClass}' | tr '[:upper:]' '[:lower:]')" "$qos"
}

