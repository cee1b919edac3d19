{{/* The chart's name, release-qualified. */}}
{{- define "xpu-cdi.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "xpu-cdi.labels" -}}
app.kubernetes.io/part-of: xpu-cdi
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
{{- end -}}

{{- define "xpu-cdi.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The labels file on the host, when labels are on. */}}
{{- define "xpu-cdi.labelsFile" -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.labels.featuresDir) .Values.labels.fileName -}}
{{- end -}}

{{/* Scheduling shared by the DaemonSets: nodeAffinity terms ORed. */}}
{{- define "xpu-cdi.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeAffinityLabels }}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      {{- range $key, $value := . }}
        - matchExpressions:
            - key: {{ $key | quote }}
              operator: In
              values: [{{ $value | quote }}]
      {{- end }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- if .Values.hostNetwork }}
hostNetwork: true
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The sharing configuration is given. */}}
{{- define "xpu-cdi.sharing" -}}
{{- if .Values.devicePlugin.config }}true{{ end -}}
{{- end -}}

{{/* A host path below installer.devRoot. */}}
{{- define "xpu-cdi.devPath" -}}
{{- $root := trimSuffix "/" .root -}}
{{- printf "%s%s" $root .path -}}
{{- end -}}
