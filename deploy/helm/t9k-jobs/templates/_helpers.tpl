{{/* Names and labels shared by every template of the chart. */}}

{{- define "t9k-jobs.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release name alone when it already names the chart. */}}
{{- define "t9k-jobs.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "t9k-jobs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "t9k-jobs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "t9k-jobs.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "t9k-jobs.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: t9k-jobs
{{- end }}

{{- define "t9k-jobs.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "t9k-jobs.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The job kinds' plural names: the bundled plugins' and rbac.extraJobResources. */}}
{{- define "t9k-jobs.jobResources" -}}
{{- $bundled := list "colossalaijobs" "deepspeedjobs" "genericjobs" "pytorchtrainingjobs" }}
{{- toJson (concat $bundled .Values.rbac.extraJobResources | uniq) }}
{{- end }}
