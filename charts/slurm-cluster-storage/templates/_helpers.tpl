{{- define "storage.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: soperator
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}
{{- define "storage.claim" -}}
{{- $ := index . 0 -}}{{- $name := index . 1 -}}{{- $v := index . 2 -}}{{- $keep := index . 3 -}}
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ $name }}
  namespace: {{ $.Release.Namespace }}
  labels: {{- include "storage.labels" $ | nindent 4 }}
  {{- if $keep }}
  annotations:
    # Users' files live here: uninstalling the chart must never delete them.
    helm.sh/resource-policy: keep
  {{- end }}
spec:
  accessModes: {{- toYaml ($v.accessModes | default (list "ReadWriteOnce")) | nindent 4 }}
  {{- if eq ($v.storageClassName | toString) "-" }}
  storageClassName: ""
  {{- else if $v.storageClassName }}
  storageClassName: {{ $v.storageClassName }}
  {{- end }}
  resources:
    requests:
      storage: {{ $v.size }}
{{- end }}
