{{- define "slurm-operator.name" -}}{{ .Release.Name }}-slurm-operator{{- end }}
{{- define "slurm-operator.labels" -}}
app.kubernetes.io/name: slurm-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}
{{- define "slurm-operator.selector" -}}
app.kubernetes.io/name: slurm-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- define "slurm-operator.namespaces" -}}
{{- if .Values.watchNamespaces }}{{ join "," .Values.watchNamespaces }}{{ else }}{{ .Release.Namespace }}{{ end -}}
{{- end }}
