{{/* The release's name prefix for every object. */}}
{{- define "adk.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "adk.labels" -}}
app.kubernetes.io/name: adk
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "adk.selector" -}}
app.kubernetes.io/name: adk
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "adk.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The NATS URL: the bundled NATS chart's service, or the external one. */}}
{{- define "adk.natsURL" -}}
{{- if .Values.nats.enabled -}}
nats://{{ .Release.Name }}-nats:4222
{{- else -}}
{{- required "externalNATS.url is required when nats.enabled is false" .Values.externalNATS.url -}}
{{- end -}}
{{- end -}}

{{/* Flags every role shares: NATS and the ops endpoints. */}}
{{- define "adk.commonArgs" -}}
- --nats
- {{ include "adk.natsURL" . | quote }}
{{- if .Values.externalNATS.credsSecret }}
- --nats-creds
- /etc/adk/nats/creds
{{- end }}
- --metrics-addr
- {{ printf "0.0.0.0:%v" .Values.metricsPort | quote }}
- --insecure-listen
{{- end -}}

{{/* The log level and settings file (coordinator, worker, store, api). */}}
{{- define "adk.settingsArgs" -}}
- --log-level
- {{ .Values.logLevel | quote }}
{{- if .Values.settings }}
- --config
- /etc/adk/settings/adk.json
{{- end }}
{{- end -}}

{{/* Probes on the ops endpoints; readiness is /readyz (a coordinator is
ready once it knows a Raft leader). */}}
{{- define "adk.probes" -}}
ports:
  - name: metrics
    containerPort: {{ .Values.metricsPort }}
livenessProbe:
  httpGet: {path: /healthz, port: metrics}
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: metrics}
  periodSeconds: 5
  failureThreshold: 3
startupProbe:
  httpGet: {path: /healthz, port: metrics}
  periodSeconds: 2
  failureThreshold: 60
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
{{- end -}}

{{- define "adk.commonMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.externalNATS.credsSecret }}
- name: nats-creds
  mountPath: /etc/adk/nats
  readOnly: true
{{- end }}
{{- if .Values.settings }}
- name: settings
  mountPath: /etc/adk/settings
  readOnly: true
{{- end }}
{{- end -}}

{{- define "adk.commonVolumes" -}}
- name: tmp
  emptyDir: {}
{{- if .Values.externalNATS.credsSecret }}
- name: nats-creds
  secret:
    secretName: {{ .Values.externalNATS.credsSecret }}
    items: [{key: creds, path: creds}]
{{- end }}
{{- if .Values.settings }}
- name: settings
  configMap:
    name: {{ include "adk.fullname" . }}-settings
{{- end }}
{{- end -}}

{{- define "adk.tokensVolume" -}}
- name: tokens
  secret:
    secretName: {{ required "tokens.existingSecret names the Secret with the tokens file" .Values.tokens.existingSecret }}
    items: [{key: tokens, path: tokens}]
{{- end -}}

{{- define "adk.podSpec" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}
