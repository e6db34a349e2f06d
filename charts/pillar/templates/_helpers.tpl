{{/* The CSI driver's name: fixed, it is compiled into pillar. */}}
{{- define "pillar.driverName" -}}pillar-csi.bhyoo.com{{- end -}}

{{/* The audience of the node plugins' projected tokens (the controller's --node-token-audience). */}}
{{- define "pillar.tokenAudience" -}}pillar-csi.bhyoo.com{{- end -}}

{{- define "pillar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Prefix of every object's name. */}}
{{- define "pillar.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "pillar.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "pillar.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "pillar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pillar
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "controller"). */}}
{{- define "pillar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pillar.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* All labels of one component's objects. */}}
{{- define "pillar.componentLabels" -}}
{{ include "pillar.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An image reference: (dict "image" .Values.x.image "root" $); an empty tag is the appVersion. */}}
{{- define "pillar.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* A component's --log-level: (dict "level" .Values.x.logLevel "root" $). */}}
{{- define "pillar.logLevel" -}}
{{- default .root.Values.logLevel .level -}}
{{- end -}}

{{/* The CSI sidecars' --v for the chart's logLevel. */}}
{{- define "pillar.sidecarVerbosity" -}}
{{- if eq .Values.logLevel "debug" -}}5{{- else -}}2{{- end -}}
{{- end -}}

{{- define "pillar.controllerServiceAccount" -}}
{{- default (printf "%s-controller" (include "pillar.fullname" .)) .Values.serviceAccounts.controller.name -}}
{{- end -}}

{{- define "pillar.nodeServiceAccount" -}}
{{- default (printf "%s-node" (include "pillar.fullname" .)) .Values.serviceAccounts.node.name -}}
{{- end -}}

{{- define "pillar.agentServiceAccount" -}}
{{- default (printf "%s-agent" (include "pillar.fullname" .)) .Values.serviceAccounts.agent.name -}}
{{- end -}}

{{/* The controller Service (the node registry). */}}
{{- define "pillar.registryService" -}}
{{- printf "%s-controller" (include "pillar.fullname" .) -}}
{{- end -}}

{{/* The registry's address as the node plugins dial it, and as its certificate names it. */}}
{{- define "pillar.registryHost" -}}
{{- printf "%s.%s.svc" (include "pillar.registryService" .) .Release.Namespace -}}
{{- end -}}

{{/* The Secret of one agent's certificate: (dict "root" $ "name" AGENT) -> <tls.secrets.agent>-<AGENT>. */}}
{{- define "pillar.agentSecret" -}}
{{- printf "%s-%s" .root.Values.tls.secrets.agent .name -}}
{{- end -}}

{{/* The port of agent.listen ("host:port"). */}}
{{- define "pillar.agentPort" -}}
{{- regexReplaceAll "^.*:" .Values.agent.listen "" -}}
{{- end -}}

{{/* One agent pool as its --pool value: NAME=zfs | NAME=lvm | NAME=lvm-thin:THIN | NAME=file:PATH. */}}
{{- define "pillar.poolFlag" -}}
{{- if eq .type "lvm-thin" -}}
{{- printf "%s=lvm-thin:%s" .name .thinPool -}}
{{- else if eq .type "file" -}}
{{- printf "%s=file:%s" .name .path -}}
{{- else -}}
{{- printf "%s=%s" .name .type -}}
{{- end -}}
{{- end -}}

{{/* The volume of one TLS Secret: pillar reads tls.crt, tls.key and ca.crt from it.
(dict "name" VOLUME "secret" SECRET "mode" "0440"); mode defaults to 0400 (owner: root). */}}
{{- define "pillar.tlsVolume" -}}
- name: {{ .name }}
  secret:
    secretName: {{ .secret }}
    defaultMode: {{ default "0400" .mode }}
{{- end -}}

{{/* The controller's leader Lease (its --leader-election-name; the Role names it). */}}
{{- define "pillar.leaseName" -}}pillar-csi-controller{{- end -}}

{{/* One CSI sidecar of the controller pod, on the shared socket, with leader
election: (dict "root" $ "name" NAME "sidecar" .Values.controller.sidecars.X "args" LIST). */}}
{{- define "pillar.csiSidecar" -}}
- name: {{ .name }}
  image: {{ printf "%s:%s" .sidecar.image.repository .sidecar.image.tag }}
  imagePullPolicy: {{ .sidecar.image.pullPolicy }}
  args:
    - --csi-address=/csi/csi.sock
    - --leader-election
    - --leader-election-namespace=$(POD_NAMESPACE)
    {{- /* The controller's Lease timings: a sidecar that loses its Lease
    exits, so under load the sidecars must be as patient as the controller. */}}
    {{- with .root.Values.controller.leaderElection }}
    - --leader-election-lease-duration={{ .leaseDuration }}s
    - --leader-election-renew-deadline={{ .renewDeadline }}s
    - --leader-election-retry-period={{ .retryPeriod }}s
    {{- end }}
    {{- range .args }}
    - {{ . }}
    {{- end }}
    - --timeout={{ .sidecar.timeout }}
    - {{ .workerFlag | default "--worker-threads" }}={{ .sidecar.workers }}
    - --kube-api-qps={{ .sidecar.kubeApiQps }}
    - --kube-api-burst={{ .sidecar.kubeApiBurst }}
    - --v={{ include "pillar.sidecarVerbosity" .root }}
    {{- range .sidecar.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  env:
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
  {{- with .sidecar.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: ["ALL"]
  volumeMounts:
    - name: socket-dir
      mountPath: /csi
{{- end -}}

{{/* "true" when a storageClasses.classes entry asks for CHAP, else empty. */}}
{{- define "pillar.classAuth" -}}
{{- if and .auth (eq (.auth.mode | default "none") "chap") -}}true{{- end -}}
{{- end -}}

{{/* The CHAP Secrets of the chart's StorageClasses: namespace -> sorted, unique names. */}}
{{- define "pillar.authSecrets" -}}
{{- $by := dict -}}
{{- if .Values.storageClasses.create -}}
{{- range .Values.storageClasses.classes -}}
{{- if include "pillar.classAuth" . -}}
{{- $ns := default $.Release.Namespace .auth.secretNamespace -}}
{{- $_ := set $by $ns (append (get $by $ns | default list) .auth.secretName | uniq | sortAlpha) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $by -}}
{{- end -}}
