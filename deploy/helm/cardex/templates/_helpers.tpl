{{- define "cardex.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cardex.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cardex.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: serve
{{- end -}}

{{- define "cardex.dbSecret" -}}
{{- default (printf "%s-db" (include "cardex.fullname" .)) .Values.databaseURL.existingSecret -}}
{{- end -}}

{{- define "cardex.tokensSecret" -}}
{{- default (printf "%s-service-tokens" (include "cardex.fullname" .)) .Values.serviceTokens.existingSecret -}}
{{- end -}}

{{/* The environment every cardex container gets: the database URL from its Secret. */}}
{{- define "cardex.env" -}}
- name: CARDEX_STORE
  value: postgres
- name: CARDEX_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "cardex.dbSecret" . }}
      key: {{ .Values.databaseURL.key }}
{{- end -}}

{{/* The `cardex serve` arguments: the same as docker-compose.yml's. */}}
{{- define "cardex.serveArgs" -}}
- serve
- --listen=0.0.0.0:{{ .Values.service.grpcPort }}
- --http-listen=0.0.0.0:{{ .Values.service.httpPort }}
- --service-tokens=/etc/cardex/service-tokens/{{ .Values.serviceTokens.key }}
{{- if .Values.agentTokens.existingSecret }}
- --agent-tokens=/etc/cardex/agent-tokens/{{ .Values.agentTokens.key }}
{{- end }}
- --data-dir=/data
{{- if .Values.residency.enabled }}
- --memory-budget={{ .Values.residency.memoryBudget }}
{{- if .Values.residency.preloadShard }}
- --shard=$(POD_INDEX)/{{ .Values.replicaCount }}
{{- end }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}
