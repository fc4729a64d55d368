#!/usr/bin/env bash
# The DRA suite: the private one-node cluster of run.sh plus
# kube-controller-manager (claims from templates, deallocation), with
# nri-cpupool as the DRA driver cpupool.dev (docs/dra.md). Run as root:
# make k8s-e2e runs it after run.sh.
set -uo pipefail
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/checks.sh"

CONFIG=/tmp/nri-cpupool-k8s-dra.$$.yaml
cat > "$CONFIG" <<YAML
isolatedCPUs: "$LAST"
pools: {exclusive: {cpus: "$LAST"}}
dra: {enabled: true, nodeName: localhost}
YAML
"$REPO/bin/nri-cpupool" validate --config "$CONFIG" > "$CONFIG.validate" 2>&1
VALIDATE=$(cat "$CONFIG.validate")
KUBELET_EXTRA=$(sed -n 's/^    \(kubeReserved: .*\)$/\1/p' "$CONFIG.validate")
rm -f "$CONFIG.validate"
[ -n "$KUBELET_EXTRA" ] || die "validate recommends no kubeReserved: $VALIDATE"

# driver_access: the shipped role for the driver's service account, a token
# for it in the plugin's kubeconfig, and the DRA keys of the plugin's config
# (this cluster's paths). Runs inside setup_cluster, before the plugin.
driver_access() {
  start_controller_manager resourceclaim-controller,garbage-collector-controller
  python3 - "$REPO/deploy/kubernetes/dra/nri-cpupool-dra.yaml" > "$W/dra-rbac.yaml" <<'PY' || die "reading the DRA manifest"
import sys
docs = open(sys.argv[1]).read().split("\n---\n")
keep = ("kind: Namespace", "kind: ServiceAccount", "kind: ClusterRole\n", "kind: ClusterRoleBinding")
print("\n---\n".join(d for d in docs if any(k in d + "\n" for k in keep)))
PY
  kubectl apply -f "$W/dra-rbac.yaml" >/dev/null || die "applying the driver's role"
  kubectl apply -f "$REPO/deploy/kubernetes/dra/deviceclasses.yaml" >/dev/null || die "applying the DeviceClasses"
  local token
  token=$(kubectl -n nri-cpupool create token nri-cpupool --duration 3h) || die "creating the driver's token"
  cat > "$W/driver.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$W/pki/ca.crt"}}]
users: [{name: driver, user: {token: "$token"}}]
contexts: [{name: e2e, context: {cluster: e2e, user: driver}}]
current-context: e2e
YAML
  # The kubelet's plugin directories are not made here: the plugin starts
  # before the kubelet, as at a node's first boot, and its driver waits
  # for them (issue 30, defect 10; see the first-boot checks below).
  cat >> "$CONFIG" <<YAML
dra:
  enabled: true
  nodeName: localhost
  kubeconfig: $W/driver.kubeconfig
  cdiDir: $W/cdi
  pluginDir: $W/kubelet/plugins/cpupool.dev
  registryDir: $W/kubelet/plugins_registry
YAML
  # The first dra line above is the one validate read; keep the full one.
  sed -i '0,/^dra: {enabled: true, nodeName: localhost}$/{//d}' "$CONFIG"
}
setup_cluster "$CONFIG" driver_access
mv "$CONFIG" "$W/dra.yaml"
say "machine: CPUs $ONLINE; CPU $LAST is the exclusive pool, $INFRA infra; kubelet: $KUBELET_EXTRA"

claims_are() { [ "$(claims_file)" = "$1" ]; }
claim_gone() { ! kubectl get resourceclaim "$1" >/dev/null 2>&1; }
claims_file() { python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["claims"]))' "$W/plugin-state/dra-claims.json" 2>/dev/null || echo 0; }
cdi_specs() { find "$W/cdi" -name 'cpupool.dev-claim_*.json' | wc -l; }
scheduled_message() { kubectl get pod "$1" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}'; }
claim_of() { kubectl get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}'; }
# our_slices: driver, node, then each device's name, pool, numaNode and
# capacity, one per line.
our_slices() {
  kubectl get resourceslices -o json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["items"]:
    sp = s["spec"]
    if sp["driver"] != "cpupool.dev" or sp.get("nodeName") != sys.argv[1]:
        continue
    for d in sp.get("devices", []):
        a = d.get("attributes", {})
        cap = d.get("capacity", {}).get("cpupool.dev/cpus", {}).get("value", "-")
        print(d["name"], a["cpupool.dev/pool"]["string"], a["resource.kubernetes.io/numaNode"]["int"], a["cpupool.dev/model"]["string"], cap)' "$1"
}
slices_show() { [ "$(our_slices localhost)" = "$1" ]; }

# ------------------------------------------------------------------ slices
say "the node's ResourceSlices appear with the documented attributes"
wait_for "the driver's ResourceSlices" slices_show "exclusive-numa0 exclusive 0 numaNode 1"
check "ResourceSlices of localhost (device pool numaNode model capacity)" "$(our_slices localhost)" "exclusive-numa0 exclusive 0 numaNode 1"

# ------------------------------------------------------------------ claims
kubectl apply -f - >/dev/null <<YAML || die "creating the claim template"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-cpu}
spec:
  spec:
    devices:
      requests:
      - name: cpus
        exactly:
          deviceClassName: cpupool-exclusive
          capacity: {requests: {cpupool.dev/cpus: "1"}}
YAML
say "a pod with a ResourceClaimTemplate for 1 exclusive CPU runs pinned to it (pause on infra)"
# A limit too, so that the kubelet sets a quota (1000) on the container and on the pod.
pod first --claim-template one-cpu --request cpu=10m --limit cpu=10m
assert_pinned first burstable "$LAST"
FIRST=$(ctr_of first)
FIRST_ENV=$(env_of "$FIRST" | grep '^CPUPOOL_CLAIM_')
FIRST_TOKEN=${FIRST_ENV#*=}
check "first: one claim variable, carrying a 32-character token" "$(echo "$FIRST_ENV" | wc -l) ${#FIRST_TOKEN}" "1 32"
check_contains "first: told its CPUs" "$(env_of "$FIRST")" "CPUPOOL_CPUS=$LAST"
check "first: no CFS quota (a 10m quota would throttle it)" "$(quota_of "$FIRST")" -1
check "first: no CFS quota on its pod cgroup either" "$(pod_quota_of "$FIRST")" -1
check "the driver remembers one claim" "$(claims_file)" 1
check "one CDI spec" "$(cdi_specs)" 1

say "a second such pod stays Pending with the scheduler's reason"
pod second --claim-template one-cpu --request cpu=10m
sleep 3
check "second: phase" "$(kubectl get pod second -o jsonpath='{.status.phase}')" Pending
check_contains "second: the scheduler's reason" "$(scheduled_message second)" "cannot allocate all claims"

say "a pod that sets the claim's variable itself is not pinned to anyone's CPUs"
pod copied --env "$FIRST_ENV" --request cpu=100m
check_contains "a copied claim variable is refused" "$(waiting_message copied)" "already gives its CPUs to container"
pod guessed --env "${FIRST_ENV%%=*}=0123456789abcdef0123456789abcdef" --request cpu=100m
check_contains "a guessed claim token is refused" "$(waiting_message guessed)" "unknown claim token"
pod annotated --annotation pool.cpupool.dev=exclusive --request cpu=100m
check_contains "an exclusive annotation is refused" "$(waiting_message annotated)" "given only through ResourceClaims"
delete_pods copied guessed annotated

# ------------------------------------------------------------------ restarts
say "kill -9 of the plugin, a kubelet restart and a containerd restart move nothing and leak nothing"
kill -9 "$PIDS_plugin"; wait "$PIDS_plugin" 2>/dev/null; PIDS_plugin=""
start_plugin "$W/dra.yaml"
check "first: same container after kill -9" "$(ctr_of first)" "$FIRST"
check "first: same CPUs after kill -9" "$(cpuset_of "$FIRST")" "$LAST"
stop_kubelet
start_kubelet
check "first: same container after the kubelet restart" "$(ctr_of first)" "$FIRST"
check "first: same CPUs after the kubelet restart" "$(cpuset_of "$FIRST")" "$LAST"
SYNCS=$(grep -c synchronized "$W/plugin.log")
restart_containerd
wait_for "the plugin to synchronize with the restarted runtime" log_grew synchronized "$SYNCS"
check "first: same container after the containerd restart" "$(ctr_of first)" "$FIRST"
check "first: same CPUs after the containerd restart" "$(cpuset_of "$FIRST")" "$LAST"
check "second: still Pending" "$(kubectl get pod second -o jsonpath='{.status.phase}')" Pending
check "still one claim remembered" "$(claims_file)" 1
check "still one CDI spec" "$(cdi_specs)" 1

# ------------------------------------------------------------------ first boot
say "first boot: the plugin starts before the kubelet has made its plugin directories; it pins, its driver waits, then registers"
# The driver started before the kubelet at setup_cluster already, with no
# plugins_registry: it waited, then registered.
check_contains "at setup the driver waited for the kubelet's directories" "$(grep -m1 'DRA driver waiting-for-kubelet' "$W/plugin.log")" \
  "the kubelet's plugin registration directory $W/kubelet/plugins_registry: it does not exist"
check_contains "then registered" "$(grep -m1 'DRA driver registered' "$W/plugin.log")" "DRA driver registered"
# Now again, with a running claim container: a node rebooted onto a fresh
# kubelet root directory.
stop_kubelet
stop_plugin
rm -rf "$W/kubelet/plugins_registry" "$W/kubelet/plugins/cpupool.dev"
WAITS=$(grep -c 'DRA driver waiting-for-kubelet' "$W/plugin.log")
REGS=$(grep -c 'DRA driver registered' "$W/plugin.log")
start_plugin "$W/dra.yaml"
wait_for "the driver to wait for the kubelet's directories" log_grew 'DRA driver waiting-for-kubelet' "$WAITS"
check_contains "status: the driver waits for the kubelet" "$("$REPO/bin/nri-cpupool" status --state-file "$W/plugin-state/state.json")" \
  "DRA driver: waiting-for-kubelet since"
# A pod created through the CRI while the kubelet is away is pinned: the NRI
# side does not wait for the driver.
cat > "$W/pod-firstboot.json" <<JSON
{"metadata": {"name": "firstboot", "namespace": "default", "uid": "uid-firstboot", "attempt": 0},
 "log_directory": "$W/logs/firstboot",
 "linux": {"cgroup_parent": "$KUBE_CGROUP_ROOT/firstboot", "security_context": {"namespace_options": {"network": 2}}}}
JSON
cat > "$W/ctr-firstboot.json" <<JSON
{"metadata": {"name": "app", "attempt": 0}, "image": {"image": "$IMAGE"}, "command": ["/bin/sleep", "inf"],
 "log_path": "app.0.log", "linux": {"resources": {"cpu_shares": 102, "cpu_quota": 10000, "cpu_period": 100000}}}
JSON
FB_POD=$(crictl runp "$W/pod-firstboot.json") || die "running the first-boot pod through the CRI"
FB_CTR=$(crictl create "$FB_POD" "$W/ctr-firstboot.json" "$W/pod-firstboot.json") || die "creating its container"
crictl start "$FB_CTR" >/dev/null || die "starting its container"
check "a container created while the driver waits is pinned (infra)" "$(cpuset_of "$FB_CTR")" "$INFRA"
check "first: same CPUs while the driver waits" "$(cpuset_of "$FIRST")" "$LAST"
sleep 3
check "the plugin still runs while the driver waits" "$(kill -0 "$PIDS_plugin" 2>/dev/null && echo running)" running
check "the plugin made none of the kubelet's directories" "$([ -e "$W/kubelet/plugins_registry" ] && echo made || echo absent)" absent
crictl rmp -f "$FB_POD" >/dev/null || die "removing the first-boot pod"
start_kubelet
wait_for "the driver to register with the kubelet" log_grew 'DRA driver registered' "$REGS"
check_contains "status: the driver is registered" "$("$REPO/bin/nri-cpupool" status --state-file "$W/plugin-state/state.json")" \
  "DRA driver: registered since"
check "first: same CPUs after the first boot" "$(cpuset_of "$FIRST")" "$LAST"
check "still one claim remembered after the first boot" "$(claims_file)" 1

say "deleting the first pod deallocates its claim; the second then runs on the freed CPU"
FIRST_CLAIM=$(claim_of first)
delete_pods first
assert_pinned second burstable "$LAST"
wait_for "the first claim to be deleted" claim_gone "$FIRST_CLAIM"
check "the driver remembers the second claim only" "$(claims_file)" 1
check "one CDI spec" "$(cdi_specs)" 1
delete_pods second
wait_for "the driver to forget the second claim" claims_are 0
check "no claim remembered" "$(claims_file)" 0
check "no CDI spec left" "$(cdi_specs)" 0

say "a claim for a CPU and memory: Prepare reserves the memory the scheduler counted (issue 31)"
kubectl apply -f - >/dev/null <<YAML || die "creating the claim template with memory"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-cpu-memory}
spec:
  spec:
    devices:
      requests:
      - name: cpus
        exactly:
          deviceClassName: cpupool-exclusive
          capacity: {requests: {cpupool.dev/cpus: "1", cpupool.dev/memory: 64Mi}}
YAML
pod withmem --claim-template one-cpu-memory --request cpu=10m --request memory=64Mi --limit memory=64Mi
assert_pinned withmem burstable "$LAST"
claim_memory() { python3 -c 'import json,sys; print(*[m.get("memory", 0) for c in json.load(open(sys.argv[1]))["claims"].values() for r in c["requests"].values() for m in r.get("memory", [])])' "$W/plugin-state/dra-claims.json" 2>/dev/null; }
check "the claim's memory is recorded on its NUMA node" "$(claim_memory)" 67108864
delete_pods withmem
wait_for "the driver to forget the memory claim" claims_are 0

# ------------------------------------------------------------------ alias
say "the extended-resource alias: cpupool.dev/exclusive: 1 served by DRA (dra.devices: cpu)"
sed -i 's/^  enabled: true$/  enabled: true\n  devices: cpu/' "$W/dra.yaml"
stop_plugin
start_plugin "$W/dra.yaml"
wait_for "the per-CPU slices" slices_show "exclusive-numa0-0 exclusive 0 cpu -"
check "ResourceSlices in the cpu model" "$(our_slices localhost)" "exclusive-numa0-0 exclusive 0 cpu -"
pod alias --limit cpupool.dev/exclusive=1 --request cpu=10m
assert_pinned alias burstable "$LAST"
check_contains "the scheduler made the extended-resource claim" \
  "$(kubectl get resourceclaims -o jsonpath='{.items[*].metadata.annotations}')" "resource.kubernetes.io/extended-resource-claim"
delete_pods alias

# ------------------------------------------------------------------ NUMA alignment
# fake_node NAME FIXTURE CAPACITY ALLOCATABLE: a Ready Node without a
# kubelet, with the ResourceSlices the driver would publish for the fixture
# (tools/draslices: the driver's own code on it) under the Xeon config.
# CAPACITY and ALLOCATABLE are the status's JSON objects.
fake_node() {
  local name=$1 fixture=$2 capacity=$3 allocatable=$4 now
  (cd "$REPO" && go run ./tools/mksysfs -out "$W/sysfs" "testdata/topologies/$fixture.yaml" >/dev/null &&
    go run ./tools/draslices -sysfs-root "$W/sysfs/$fixture" -config testdata/configs/xeon.yaml -node "$name" > "$W/$name-slices.json") ||
    die "making $name's slices"
  kubectl apply -f - >/dev/null <<YAML || die "creating $name"
apiVersion: v1
kind: Node
metadata: {name: $name, labels: {kubernetes.io/hostname: $name}}
YAML
  now=$(date -u +%FT%TZ)
  kubectl patch node "$name" --subresource status --type merge -p '{"status": {"capacity": '"$capacity"', "allocatable": '"$allocatable"',
    "conditions": [{"type": "Ready", "status": "True", "reason": "e2e", "lastHeartbeatTime": "'"$now"'", "lastTransitionTime": "'"$now"'"}]}}' >/dev/null ||
    die "$name's status"
  kubectl apply -f "$W/$name-slices.json" >/dev/null || die "publishing $name's slices (the API server validates the capacities' request policies)"
}
# nic_slice NODE NAME:NUMA...: the test NIC driver's devices on NODE.
nic_slice() {
  local node=$1 devices="" d
  shift
  for d in "$@"; do
    devices+="
  - name: ${d%%:*}
    attributes: {resource.kubernetes.io/numaNode: {int: ${d##*:}}}"
  done
  kubectl apply -f - >/dev/null <<YAML || die "$node's NICs"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: $node-nic}
spec:
  driver: nic.example.com
  nodeName: $node
  pool: {name: $node, generation: 1, resourceSliceCount: 1}
  devices:$devices
YAML
}
# A second Node without a kubelet, with the slices the driver would publish
# for a 2-socket Xeon (tools/draslices: the driver's code on a fixture) and
# a test "NIC" driver's device on NUMA node 1. Pods bound there never run;
# the allocated claims show the scheduler's choice.
say "NUMA alignment on a second, multi-NUMA node: CPUs and NIC on one NUMA node, or unschedulable"
fake_node node-b xeon-2s-interleaved '{"cpu": "80", "memory": "64Gi", "pods": "10"}' '{"cpu": "80", "memory": "64Gi", "pods": "10"}'
check "node-b's slices (the driver's code on the Xeon fixture)" "$(our_slices node-b | tr '\n' ';')" \
  "exclusive-numa0 exclusive 0 numaNode 30;exclusive-numa1 exclusive 1 numaNode 30;exclusive-non-isolcpus-numa1 exclusive-non-isolcpus 1 numaNode 2;"
kubectl apply -f - >/dev/null <<YAML || die "the NIC driver's DeviceClass"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic}
spec: {selectors: [{cel: {expression: 'device.driver == "nic.example.com"'}}]}
YAML
nic_slice node-b eth1:1 eth2:1
near_nic() { # NAME CPUS [alone]: a claim for CPUS exclusive CPUs on the NIC's NUMA node (alone: no NIC)
  local nic="    - name: nic
      exactly: {deviceClassName: nic, count: 1}
    constraints:
    - requests: [cpus, nic]
      matchAttribute: resource.kubernetes.io/numaNode"
  [ "${3:-}" = alone ] && nic=""
  kubectl apply -f - >/dev/null <<YAML || die "creating claim $1"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1}
spec:
  devices:
    requests:
    - name: cpus
      exactly:
        deviceClassName: cpupool-exclusive
        capacity: {requests: {cpupool.dev/cpus: "$2"}}
$nic
YAML
}
claim_allocated() { [ -n "$(kubectl get resourceclaim "$1" -o jsonpath='{.status.allocation}')" ]; }
allocated() { kubectl get resourceclaim "$1" -o jsonpath='{range .status.allocation.devices.results[*]}{.request}={.device}@{.pool} {end}'; }
near_nic aligned 4
pod aligned --claim aligned --node node-b
wait_for "the aligned claim's allocation" claim_allocated aligned
check "the aligned claim: CPUs and NIC on NUMA node 1 of node-b" "$(allocated aligned)" "cpus=exclusive-numa1@node-b nic=eth1@node-b "
check "the aligned claim: 4 CPUs counted" "$(kubectl get resourceclaim aligned -o jsonpath='{.status.allocation.devices.results[0].consumedCapacity.cpupool\.dev/cpus}')" 4
# Node 1 has 26 exclusive CPUs left and a free NIC (eth2); node 0 has 30
# CPUs and no NIC. 27 CPUs fit node 0, but not beside a NIC.
near_nic unalignable 27
pod unalignable --claim unalignable --node node-b
sleep 3
check "the unalignable claim is not allocated" "$(kubectl get resourceclaim unalignable -o jsonpath='{.status.allocation}')" ""
check "its pod stays Pending" "$(kubectl get pod unalignable -o jsonpath='{.status.phase}')" Pending
check_contains "with the scheduler's reason" "$(scheduled_message unalignable)" "cannot allocate all claims"
near_nic elsewhere 27 alone
pod elsewhere --claim elsewhere --node node-b
wait_for "the claim without a NIC to be allocated" claim_allocated elsewhere
check "the same 27 CPUs without a NIC: allocated on NUMA node 0" "$(allocated elsewhere)" "cpus=exclusive-numa0@node-b "
kubectl delete pod aligned unalignable elsewhere --force --grace-period 0 >/dev/null 2>&1

say "memory follows the CPUs through the scheduler: a third node whose 2 MiB hugepages are on NUMA node 1 only (issue 31)"
fake_node node-c xeon-2s-hugepages '{"cpu": "80", "memory": "128Gi", "hugepages-2Mi": "1Gi", "pods": "10"}' \
  '{"cpu": "80", "memory": "127Gi", "hugepages-2Mi": "1Gi", "pods": "10"}'
# memory_caps NODE: each device's memory capacities, "name memory hugepages2Mi hugepages1Gi".
memory_caps() {
  kubectl get resourceslices -o json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["items"]:
    sp = s["spec"]
    if sp["driver"] != "cpupool.dev" or sp.get("nodeName") != sys.argv[1]:
        continue
    for d in sp.get("devices", []):
        c = d.get("capacity", {})
        print(d["name"], *[c.get("cpupool.dev/" + n, {}).get("value", "-") for n in ("memory", "hugepages2Mi", "hugepages1Gi")])' "$1"
}
check "node-c's memory capacities: on the exclusive pool's device of each node only" "$(memory_caps node-c | tr '\n' ';')" \
  "exclusive-numa0 64Gi 0 0;exclusive-numa1 63Gi 1Gi 0;exclusive-non-isolcpus-numa1 - - -;"
nic_slice node-c eth0:0 eth1:1
huge_claim() { # NAME CPUS HUGEPAGES [nic]: a claim for CPUS exclusive CPUs and HUGEPAGES of 2 MiB pages (nic: and a NIC on their NUMA node)
  local nic=""
  [ "${4:-}" = nic ] && nic="    - name: nic
      exactly: {deviceClassName: nic, count: 1}
    constraints:
    - requests: [cpus, nic]
      matchAttribute: resource.kubernetes.io/numaNode"
  kubectl apply -f - >/dev/null <<YAML || die "creating claim $1"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1}
spec:
  devices:
    requests:
    - name: cpus
      exactly:
        deviceClassName: cpupool-exclusive
        capacity: {requests: {cpupool.dev/cpus: "$2", cpupool.dev/hugepages2Mi: "$3"}}
$nic
YAML
}
huge_claim huge 4 64Mi
pod huge --claim huge --node node-c
wait_for "the hugepages claim's allocation" claim_allocated huge
check "CPUs and hugepages: allocated on NUMA node 1, the node with the hugepages" "$(allocated huge)" "cpus=exclusive-numa1@node-c "
check "64Mi of hugepages counted" "$(kubectl get resourceclaim huge -o jsonpath='{.status.allocation.devices.results[0].consumedCapacity.cpupool\.dev/hugepages2Mi}')" 64Mi
check "no memory named, none counted" "$(kubectl get resourceclaim huge -o jsonpath='{.status.allocation.devices.results[0].consumedCapacity.cpupool\.dev/memory}')" 0
huge_claim huge-nic 4 64Mi nic
pod huge-nic --claim huge-nic --node node-c
wait_for "the hugepages-and-NIC claim's allocation" claim_allocated huge-nic
check "CPUs, hugepages and a NIC: on NUMA node 1, with its NIC" "$(allocated huge-nic)" "cpus=exclusive-numa1@node-c nic=eth1@node-c "
huge_claim too-many 4 2Gi
pod too-many --claim too-many --node node-c
sleep 3
check "a claim for more hugepages than any NUMA node has is not allocated" "$(kubectl get resourceclaim too-many -o jsonpath='{.status.allocation}')" ""
check "its pod stays Pending" "$(kubectl get pod too-many -o jsonpath='{.status.phase}')" Pending
check_contains "with the scheduler's reason" "$(scheduled_message too-many)" "cannot allocate all claims"
kubectl delete pod huge huge-nic too-many --force --grace-period 0 >/dev/null 2>&1
