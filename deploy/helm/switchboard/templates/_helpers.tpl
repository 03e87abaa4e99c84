{{/*
Shared pieces of the Switchboard templates. Object names are fixed
(switchboard-<component>): the configuration file names the Services, and
the kustomize manifests use the same names.
*/}}

{{/* Metadata labels. Argument: dict "ctx" $ "component" <name or "">. */}}
{{- define "switchboard.labels" -}}
{{- with .component -}}
app.kubernetes.io/component: {{ . }}
{{ end -}}
app.kubernetes.io/part-of: switchboard
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
{{- end }}

{{/*
Labels that select a component's pods: the same two labels as the
kustomize manifests, so that selectors and NetworkPolicies are identical.
Argument: the component name.
*/}}
{{- define "switchboard.selectorLabels" -}}
app.kubernetes.io/name: switchboard
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/*
Metadata of a namespaced object. Argument: dict "ctx" $ "name" <name>
"component" <name or "">.
*/}}
{{- define "switchboard.metadata" -}}
name: {{ .name }}
namespace: {{ .ctx.Release.Namespace }}
labels:
  {{- include "switchboard.labels" . | nindent 2 }}
{{- end }}

{{/*
An image reference: the service's tag, else image.tag, else the chart's
appVersion. Argument: dict "ctx" $ "image" <the service's image values>.
*/}}
{{- define "switchboard.image" -}}
{{- $tag := .image.tag | default .ctx.Values.image.tag | default .ctx.Chart.AppVersion -}}
{{- /* A number of a values file (or --set-json) arrives as a float, which
prints as another tag: --set keeps an integer whole. */ -}}
{{- if kindIs "float64" $tag -}}
{{- fail (printf "image %s: tag %v is a YAML number, which does not keep its digits (1.10 is 1.1, 20240101 prints as 2.0240101e+07): quote it, or use --set-string" .image.repository $tag) -}}
{{- end -}}
image: {{ printf "%s:%s" .image.repository (toString $tag) | quote }}
{{- with .ctx.Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/*
An environment variable from a key of a Secret the deployer (or an
operator) creates. Argument: list <variable> <Secret> <key>.
*/}}
{{- define "switchboard.secretEnv" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ index . 1 }}
      key: {{ index . 2 }}
{{- end }}

{{/* GOMEMLIMIT follows the container's memory limit (the collector's; the
services set their own below it, from their cgroup). */}}
{{- define "switchboard.gomemlimit" -}}
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- end }}

{{/*
The paths of the mTLS files (serviceAuth.tls in switchboard.yaml
references these variables), from the Secret cert-manager writes.
*/}}
{{- define "switchboard.tlsEnv" -}}
- name: SWITCHBOARD_TLS_CERT_FILE
  value: /etc/switchboard/tls/tls.crt
- name: SWITCHBOARD_TLS_KEY_FILE
  value: /etc/switchboard/tls/tls.key
- name: SWITCHBOARD_TLS_CA_FILE
  value: /etc/switchboard/tls/ca.crt
{{- end }}

{{/*
The readiness and startup handler of a gRPC server: the kubelet's gRPC
probe, or, under mTLS (which that probe cannot speak), HTTP /readyz on the
plaintext HTTP port, which follows the same health status. Argument: dict
"mtls" <bool> "port" <gRPC port>.
*/}}
{{- define "switchboard.readyHandler" -}}
{{- if .mtls -}}
httpGet:
  path: /readyz
  port: http
{{- else -}}
grpc:
  port: {{ .port }}
{{- end }}
{{- end }}

{{/* The pod security context of the Switchboard images (distroless nonroot). */}}
{{- define "switchboard.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: {{ . }}
  runAsGroup: {{ . }}
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{/* The container security context of every container. */}}
{{- define "switchboard.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop: ["ALL"]
{{- end }}

{{/* Spread a component's pods over nodes. Argument: the component name. */}}
{{- define "switchboard.topologySpread" -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "switchboard.selectorLabels" . | nindent 8 }}
{{- end }}

{{/*
Pull secrets and scheduling of a pod. Argument: dict "ctx" $ "values" <the
service's values>.
*/}}
{{- define "switchboard.scheduling" -}}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Annotations of a Switchboard service's pods: the configuration's digest,
so that a changed switchboard.yaml rolls every Deployment, and the
deployer's podAnnotations. Argument: dict "ctx" $ "values" <the service's
values>.
*/}}
{{- define "switchboard.podAnnotations" -}}
annotations:
  checksum/config: {{ include "switchboard.configDigest" .ctx }}
  {{- with .values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
The digest of the configuration file and the files beside it.
*/}}
{{- define "switchboard.configDigest" -}}
{{ toYaml (list .Values.config .Values.files) | sha256sum }}
{{- end }}

{{/*
The name of the configuration's ConfigMap: switchboard-config and the
start of its content's digest, as kustomize names a generated one. A
changed file is a new ConfigMap, which only the pods of the rollout it
starts mount: the running pods keep the file they started with instead
of taking the new one live, all at once, from an in-place update, so
that a bad file stops the rollout rather than reaching every replica.
*/}}
{{- define "switchboard.configName" -}}
switchboard-config-{{ include "switchboard.configDigest" . | trunc 10 }}
{{- end }}

{{/*
The volumes every Switchboard service mounts: the configuration and a
small writable /tmp.
*/}}
{{- define "switchboard.configVolumes" -}}
- name: config
  configMap:
    name: {{ include "switchboard.configName" . }}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{- define "switchboard.configMounts" -}}
- name: config
  mountPath: /etc/switchboard
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end }}

{{/*
The ServiceAccount of a component: no API token, no Switchboard pod talks
to the Kubernetes API. Argument: dict "ctx" $ "component" <name>.
*/}}
{{- define "switchboard.serviceAccount" -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  {{- include "switchboard.metadata" (dict "ctx" .ctx "name" (printf "switchboard-%s" .component) "component" .component) | nindent 2 }}
automountServiceAccountToken: false
{{- end }}

{{/*
The PodDisruptionBudget and HorizontalPodAutoscaler of a service.
Argument: dict "ctx" $ "component" <name> "values" <the service's values>.
*/}}
{{- define "switchboard.disruptionAndScaling" -}}
{{- $name := printf "switchboard-%s" .component -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  {{- include "switchboard.metadata" (dict "ctx" .ctx "name" $name "component" .component) | nindent 2 }}
spec:
  maxUnavailable: {{ .values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "switchboard.selectorLabels" .component | nindent 6 }}
{{- with .values.autoscaling }}
{{- if .enabled }}
{{- if gt (int .minReplicas) (int .maxReplicas) }}
{{- fail (printf "%s.autoscaling: minReplicas %v is above maxReplicas %v, which the API server refuses" $.component .minReplicas .maxReplicas) }}
{{- end }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  {{- include "switchboard.metadata" (dict "ctx" $.ctx "name" $name "component" $.component) | nindent 2 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ $name }}
  minReplicas: {{ .minReplicas }}
  maxReplicas: {{ .maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ .targetCPUUtilizationPercentage }}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: {{ .scaleDownStabilizationWindowSeconds }}
{{- end }}
{{- end }}
{{- end }}
