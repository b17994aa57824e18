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

{{- /* A PersistentVolume bound to one claim, for storage without a provisioner: nfs or hostPath. */}}
{{- define "storage.pv" -}}
{{- $ := index . 0 -}}{{- $key := index . 1 -}}{{- $suffix := index . 2 -}}{{- $v := index . 3 -}}
{{- $cluster := $.Values.clusterName | default $.Release.Name -}}
{{- with $v.persistentVolume }}
{{- if .enabled }}
{{- if and (not .nfs) (not .hostPath) }}{{ fail (printf "%s.persistentVolume.enabled needs %s.persistentVolume.nfs or .hostPath" $key $key) }}{{ end }}
{{- if and .nfs .hostPath }}{{ fail (printf "%s.persistentVolume: set nfs or hostPath, not both" $key) }}{{ end }}
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: {{ $cluster }}-{{ $.Release.Namespace }}-{{ $suffix }}
  labels: {{- include "storage.labels" $ | nindent 4 }}
  annotations:
    helm.sh/resource-policy: keep
spec:
  capacity:
    storage: {{ $v.size }}
  accessModes: {{- toYaml ($v.accessModes | default (list "ReadWriteOnce")) | nindent 4 }}
  persistentVolumeReclaimPolicy: Retain
  storageClassName: {{ $v.storageClassName | quote }}
  claimRef:
    namespace: {{ $.Release.Namespace }}
    name: {{ $cluster }}-{{ $suffix }}
  {{- if .nfs }}
  nfs: {{- toYaml .nfs | nindent 4 }}
  {{- else }}
  hostPath:
    path: {{ .hostPath }}
    type: DirectoryOrCreate
  {{- end }}
{{- end }}
{{- end }}
{{- end }}
