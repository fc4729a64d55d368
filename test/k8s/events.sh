# Pod Events (issue 43, item 2), for run.sh; sourced after cluster.sh and
# checks.sh. The plugin runs with kubernetes.events on, as the service
# account of deploy/kubernetes/nri-cpupool.yaml with the manifest's own
# role (so the role is what is tested), and a refused container's pod
# shows the refusal in `kubectl describe pod`.
# shellcheck shell=bash

# events_access: the manifest's namespace, service account, role and
# binding, and a kubeconfig with a token of that account
# ($W/events.kubeconfig).
events_access() {
  python3 - "$REPO/deploy/kubernetes/nri-cpupool.yaml" > "$W/events-rbac.yaml" <<'PY' || die "reading the manifest's role"
import sys
docs = open(sys.argv[1]).read().split("\n---\n")
keep = ("kind: Namespace", "kind: ServiceAccount", "kind: ClusterRole\n", "kind: ClusterRoleBinding")
print("\n---\n".join(d for d in docs if any(k in d + "\n" for k in keep)))
PY
  kubectl apply -f "$W/events-rbac.yaml" >/dev/null || die "applying the manifest's role"
  local token
  token=$(kubectl -n nri-cpupool create token nri-cpupool --duration 1h) || die "creating the plugin's token"
  cat > "$W/events.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$W/pki/ca.crt"}}]
users: [{name: plugin, user: {token: "$token"}}]
contexts: [{name: e2e, context: {cluster: e2e, user: plugin}}]
current-context: e2e
YAML
}

# publish_root_ca NAMESPACE: the kube-root-ca.crt ConfigMap that
# kube-controller-manager would publish in every namespace, which a pod
# with a service account token mounts (this cluster runs no controller
# manager until later).
publish_root_ca() {
  kubectl -n "$1" create configmap kube-root-ca.crt --from-file=ca.crt="$W/pki/ca.crt" --dry-run=client -o yaml |
    kubectl apply -f - >/dev/null || die "publishing kube-root-ca.crt in $1"
}

# eventually CMD...: CMD succeeds within 30 s (the check that follows
# says what was not there; this does not end the suite).
eventually() {
  for _ in $(seq 1 150); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

# describe_shows POD TEXT: `kubectl describe pod POD` shows TEXT.
describe_shows() { kubectl describe pod "$1" 2>/dev/null | grep -qF -- "$2"; }

# check_pod_events CONFIG: with kubernetes.events on (added to CONFIG's
# pools), a refusal and an exclusive pinning show in `kubectl describe
# pod`, posted as the manifest's service account; then the plugin runs
# with CONFIG again.
check_pod_events() {
  say "with kubernetes.events on, kubectl describe pod shows a refusal and where an exclusive container was pinned"
  events_access
  cp "$1" "$W/events.yaml"
  cat >> "$W/events.yaml" <<YAML
kubernetes: {events: true, nodeName: localhost, kubeconfig: $W/events.kubeconfig}
YAML
  stop_plugin
  start_plugin "$W/events.yaml"
  check "kubernetes.events runs the plugin with the Kubernetes client (nri-cpupool-dra)" \
    "$(grep -c 'pod Events on: posted on the pods as nri-cpupool' "$W/plugin.log")" 1
  pod evrefused --annotation pool.cpupool.dev=turbo --request cpu=100m
  check_contains "evrefused: refused, saying why" "$(waiting_message evrefused)" 'pool.cpupool.dev="turbo": unknown pool'
  eventually describe_shows evrefused CPUPoolRefused
  local described
  described=$(kubectl describe pod evrefused)
  check "kubectl describe pod shows the refusal's Event" "$(grep -Ec 'Warning +CPUPoolRefused +.* nri-cpupool: container default/evrefused/app: annotation pool.cpupool.dev="turbo": unknown pool' <<<"$described")" 1
  check "the Event is from nri-cpupool on this node, on the pod by its uid" \
    "$(kubectl get events --field-selector involvedObject.name=evrefused,reason=CPUPoolRefused -o jsonpath='{.items[0].source.component}/{.items[0].source.host}/{.items[0].involvedObject.uid}')" \
    "nri-cpupool/localhost/$(uid_of evrefused)"
  delete_pods evrefused
  pod evpinned --annotation pool.cpupool.dev=exclusive --request cpu=100m
  assert_pinned evpinned burstable "$LAST"
  eventually describe_shows evpinned CPUPoolPinned
  check "kubectl describe pod shows where the exclusive container was pinned" \
    "$(kubectl describe pod evpinned | grep -Ec "Normal +CPUPoolPinned +.* container app pinned to pool exclusive: CPUs $LAST,")" 1
  delete_pods evpinned
  stop_plugin
  start_plugin "$1"
}
