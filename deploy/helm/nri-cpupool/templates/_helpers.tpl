{{/* The chart's name, shortened to a DNS label. */}}
{{- define "nri-cpupool.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release name, with the chart's name added unless it contains it. */}}
{{- define "nri-cpupool.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nri-cpupool.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nri-cpupool.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "nri-cpupool.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "nri-cpupool.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The image: repository:tag. A tag may come as a number. --set image.tag=2 gives an int64, printed as written. A values file's unquoted number is a float64 by then, its spelling lost (tag: 0123 is read as 83, 0x1F as 31, 2.0 as 2, a long one rounded): refused, as no printing of it gives back the tag meant. */}}
{{- define "nri-cpupool.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if kindIs "float64" $tag }}
{{- fail "quote the image tag in a values file: image.tag is an unquoted number there, which Helm reads as a float and so loses its spelling (0123 is read as 83, 0x1F as 31, 2.0 as 2, a long one rounded); write tag: \"...\" (--set image.tag=... takes a whole number as written)" }}
{{- end }}
{{- printf "%s:%s" .Values.image.repository (toString $tag) }}
{{- end }}

{{/* The port of config.metricsAddress ("host:port"), for the probes. */}}
{{- define "nri-cpupool.metricsPort" -}}
{{- $addr := toString (default "" .Values.config.metricsAddress) }}
{{- $port := regexFind "[0-9]+$" $addr }}
{{- if or (not $addr) (not $port) }}
{{- fail (printf "the probes need config.metricsAddress as host:port (e.g. 127.0.0.1:9464), not %q; or set probes.liveness.enabled and probes.readiness.enabled to false" $addr) }}
{{- end }}
{{- $port }}
{{- end }}

{{/* The metrics address's host, without brackets: "" for every address. */}}
{{- define "nri-cpupool.metricsAddressHost" -}}
{{- $addr := toString (default "" .Values.config.metricsAddress) }}
{{- trimSuffix (regexFind ":[0-9]+$" $addr) $addr | trimPrefix "[" | trimSuffix "]" }}
{{- end }}

{{/* The probes' host: the metrics address's host; 127.0.0.1 for an empty or wildcard one. */}}
{{- define "nri-cpupool.metricsHost" -}}
{{- $host := include "nri-cpupool.metricsAddressHost" . }}
{{- if or (eq $host "") (eq $host "0.0.0.0") (eq $host "::") }}127.0.0.1{{ else }}{{ $host }}{{ end }}
{{- end }}

{{/* "true" when the metrics address is on the node's loopback (the default), where nothing outside the node reaches it. */}}
{{- define "nri-cpupool.metricsLoopback" -}}
{{- $host := include "nri-cpupool.metricsAddressHost" . }}
{{- if or (hasPrefix "127." $host) (eq $host "::1") (eq $host "localhost") }}true{{ end }}
{{- end }}

{{/* Checks of values that would render a pod that cannot work. */}}
{{- define "nri-cpupool.check" -}}
{{- $c := .Values.config }}
{{- if and $c.dra.enabled $c.kubelet.devicePlugin }}
{{- fail "config.dra.enabled and config.kubelet.devicePlugin would both hand out the exclusive pool: turn one off (docs/dra.md)" }}
{{- end }}
{{- if not (has .Values.runtime.name (list "containerd" "crio")) }}
{{- fail (printf "runtime.name is %q: use containerd or crio" .Values.runtime.name) }}
{{- end }}
{{- if $c.sandboxAffinity }}
{{- fail "config.sandboxAffinity: the chart's pod does not share the host's PID namespace, so it cannot set pause processes' affinity; keep it false (sandboxes are pinned through their cgroups)" }}
{{- end }}
{{- if not .Values.privileged }}
{{- $need := list }}
{{- /* pools, kernelWork and power may be removed with null (the binary's defaults, all off): read them nil-safe. */}}
{{- $pools := $c.pools | default dict }}
{{- range $pool := list "exclusive" "shared" "exclusive-non-isolcpus" }}
{{- range $key := list "irqIsolation" "housekeeping" }}
{{- $v := toString (default "off" (index (index $pools $pool | default dict) $key)) }}
{{- if ne $v "off" }}
{{- $need = append $need (printf "config.pools.%s.%s=%s" $pool $key $v) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $key := list "receivePacketSteering" "workqueues" }}
{{- $v := toString (default "off" (index ($c.kernelWork | default dict) $key)) }}
{{- if ne $v "off" }}
{{- $need = append $need (printf "config.kernelWork.%s=%s" $key $v) }}
{{- end }}
{{- end }}
{{- $classes := dig "power" "classes" dict $c }}
{{- if $classes }}
{{- $need = append $need (printf "config.power.classes (%s)" (keys $classes | sortAlpha | join ", ")) }}
{{- end }}
{{- if $need }}
{{- fail (printf "%s: IRQ isolation, housekeeping, kernelWork and power classes write the host's /proc/irq and files under /sys, which the chart's unprivileged pod cannot; set privileged=true (docs/install.md, \"With Helm\"), or turn them off" (join ", " $need)) }}
{{- end }}
{{- end }}
{{- range $key := list "stateFile" "nriSocket" }}
{{- if not (isAbs (toString (index $c $key))) }}
{{- fail (printf "config.%s is %q: give an absolute path" $key (toString (index $c $key))) }}
{{- end }}
{{- end }}
{{- /* Two volume mounts of the plugin's container at one path: the API
server refuses the DaemonSet ("must be unique"), found only at helm
install. These are its mounts as templates/daemonset.yaml writes them,
one (list PATH "WHAT") each, under the same if: tools/chartcheck's
TestHelperListsTheDaemonSetsMounts compares the two texts, and chartcheck
refuses any duplicate the rendering still has. */}}
{{- $mounts := list
  (list "/etc/nri-cpupool" "the config file's mount")
  (list (dir $c.stateFile) "config.stateFile's directory")
  (list (dir $c.nriSocket) "config.nriSocket's directory")
  (list "/host/sys" "the host's /sys mount")
  (list "/host/proc/cmdline" "the host's /proc/cmdline mount")
  (list "/host/sys/fs/cgroup" "the host's cgroup tree mount") }}
{{- if $c.kubelet.devicePlugin }}
{{- $mounts = append $mounts (list (toString $c.kubelet.devicePluginDir) "config.kubelet.devicePluginDir") }}
{{- end }}
{{- if $c.dra.enabled }}
{{- $mounts = append $mounts (list (toString $c.dra.pluginDir) "config.dra.pluginDir") }}
{{- $mounts = append $mounts (list (toString $c.dra.registryDir) "config.dra.registryDir") }}
{{- $mounts = append $mounts (list (toString $c.dra.cdiDir) "config.dra.cdiDir") }}
{{- end }}
{{- $seen := dict }}
{{- range $m := $mounts }}
{{- $at := clean (index $m 0) }}
{{- with index $seen $at }}
{{- fail (printf "%s and %s are both %s: the pod would mount two volumes there, which the API server refuses; give each its own directory (the state file's is /var/lib/nri-cpupool by default)" . (index $m 1) $at) }}
{{- end }}
{{- $_ := set $seen $at (index $m 1) }}
{{- end }}
{{- /* A mount inside the config file's or above it, which the API server
takes too: the kubelet mounts the ConfigMap read-only, so the runtime
cannot make a mount point inside it and the pod never starts; one above
it puts the node's directory (/etc for config.stateFile=/etc/state.json)
over the image's, read-write. tools/chartcheck refuses the same
(checkNestedInConfigMap). The config's is the list's first entry. */}}
{{- $config := clean (index (first $mounts) 0) }}
{{- range $m := rest $mounts }}
{{- $at := clean (index $m 0) }}
{{- if hasPrefix (printf "%s/" $config) $at }}
{{- fail (printf "%s is %s, inside the config file's mount %s, a ConfigMap the pod mounts read-only: the runtime cannot make a mount point there and the pod would not start; give it a directory outside %s (by default the state file's is /var/lib/nri-cpupool, the NRI socket's /var/run/nri)" (index $m 1) $at $config $config) }}
{{- end }}
{{- if hasPrefix (printf "%s/" (trimSuffix "/" $at)) $config }}
{{- fail (printf "%s is %s, above the config file's mount %s: the pod would mount the node's %s read-write over the image's, and the runtime would make %s on the node; give it a directory of its own, not above %s (by default the state file's is /var/lib/nri-cpupool, the NRI socket's /var/run/nri)" (index $m 1) $at $config $at $config $config) }}
{{- end }}
{{- end }}
{{- /* A mount inside one of the pod's fixed host mounts, or above one,
which the API server takes too: in the node's sysfs (/host/sys) the
runtime cannot make the mount point (sysfs takes no mkdir, and it is
mounted read-only) and the pod never starts; under the file
/host/proc/cmdline nothing can be mounted; in the node's cgroup tree
(/host/sys/fs/cgroup) the mount point made is a cgroup on the node. One
above (/host) mounts the node's directory read-write and makes the fixed
mount's point in it on the node. The fixed mounts among themselves (the
cgroup tree below /host/sys) and the others among themselves (the state
directory below the NRI socket's) are fine. Deepest first, so that a
directory in the cgroup tree is told so; inside before above, and
above the shallowest (/host/sys for /host). tools/chartcheck refuses the
same (checkNestedInHostMounts). */}}
{{- $fixed := list
  (list "/host/sys/fs/cgroup" "the host's cgroup tree mount" "where the mount point the runtime makes is a cgroup on the host")
  (list "/host/proc/cmdline" "the host's /proc/cmdline mount" "a file, under which nothing can be mounted: the pod would not start")
  (list "/host/sys" "the host's /sys mount" "the host's sysfs, where the runtime cannot make a mount point: the pod would not start") }}
{{- $fixedAt := list }}
{{- range $f := $fixed }}
{{- $fixedAt = append $fixedAt (index $f 0) }}
{{- end }}
{{- range $m := rest $mounts }}
{{- $at := clean (index $m 0) }}
{{- if not (has $at $fixedAt) }}
{{- range $f := $fixed }}
{{- $fat := index $f 0 }}
{{- if hasPrefix (printf "%s/" $fat) $at }}
{{- fail (printf "%s is %s, inside %s %s, %s; give it a directory outside %s (by default the state file's is /var/lib/nri-cpupool, the NRI socket's /var/run/nri)" (index $m 1) $at (index $f 1) $fat (index $f 2) $fat) }}
{{- end }}
{{- end }}
{{- range $f := reverse $fixed }}
{{- $fat := index $f 0 }}
{{- if hasPrefix (printf "%s/" (trimSuffix "/" $at)) $fat }}
{{- fail (printf "%s is %s, above %s %s: the pod would mount the host's %s read-write, and the runtime would make %s on the host; give it a directory of its own, not above %s (by default the state file's is /var/lib/nri-cpupool, the NRI socket's /var/run/nri)" (index $m 1) $at (index $f 1) $fat $at $fat $fat) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The drop-in directory on the node. */}}
{{- define "nri-cpupool.dropInDir" -}}
{{- if .Values.runtime.dropIn.dir }}{{ .Values.runtime.dropIn.dir }}
{{- else if eq .Values.runtime.name "crio" }}/etc/crio/crio.conf.d
{{- else }}/etc/containerd/conf.d
{{- end }}
{{- end }}

{{/* The fail-closed drop-in's file name in the drop-in directory (packaging/containerd, packaging/crio). */}}
{{- define "nri-cpupool.failClosedDropIn" -}}
{{- if eq .Values.runtime.name "crio" }}20-nri-cpupool-fail-closed.conf{{ else }}nri-cpupool-fail-closed.toml{{ end }}
{{- end }}
