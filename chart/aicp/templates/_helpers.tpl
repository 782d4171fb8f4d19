{{/*
Names and labels shared by every template.
*/}}

{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "aicp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name, plus the chart name unless the release name
already contains it. 63 characters at most (DNS-1123 label).
*/}}
{{- define "aicp.fullname" -}}
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

{{- define "aicp.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select this release's pods; never change them after install. */}}
{{- define "aicp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aicp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The recommended common labels. */}}
{{- define "aicp.labels" -}}
helm.sh/chart: {{ include "aicp.chart" . }}
{{ include "aicp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: control-plane
app.kubernetes.io/part-of: aicp
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "aicp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "aicp.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding DATABASE_URL and the admin token: the user's, or the chart's own. */}}
{{- define "aicp.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else }}
{{- include "aicp.fullname" . }}
{{- end }}
{{- end }}

{{- define "aicp.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}
