{{/* The chart's name (nameOverride). */}}
{{- define "xpu-cdi.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name: fullnameOverride, else the name,
release-qualified. 50 characters at most, so that the longest suffix
(-dra-driver) keeps a name within 63. */}}
{{- define "xpu-cdi.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "xpu-cdi.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
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

{{/* Scheduling of a pod of the chart: (dict "root" $ "component"
.Values.<component>). The component's nodeSelector, tolerations and
priorityClassName replace the top-level ones when not empty; the
nodeAffinity terms (ORed) are the top-level nodeAffinityLabels. "noPriority"
true leaves the priority class out (helm test's pod). */}}
{{- define "xpu-cdi.scheduling" -}}
{{- $c := .component -}}
{{- with .root -}}
{{- with ($c.nodeSelector | default .Values.nodeSelector) }}
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
{{- with ($c.tolerations | default .Values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if not $.noPriority }}
{{- with ($c.priorityClassName | default .Values.priorityClassName) }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- end }}
{{- if .Values.hostNetwork }}
hostNetwork: true
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* The resources of a component's container: (dict "root" $ "component"
.Values.<component>), its own when set, else the top-level ones. */}}
{{- define "xpu-cdi.resources" -}}
{{- with (.component.resources | default .root.Values.resources) }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* The spec directories the device plugin and the DRA driver read, as a
comma-separated list: the installer's, else cdi.specDirs. */}}
{{- define "xpu-cdi.specDirs" -}}
{{- if .Values.installer.enabled -}}
{{- dir .Values.cdi.specFile -}}
{{- else -}}
{{- join "," .Values.cdi.specDirs -}}
{{- end -}}
{{- end -}}

{{/* The kubelet's root directory on the host, without a trailing slash. */}}
{{- define "xpu-cdi.kubeletDir" -}}
{{- trimSuffix "/" .Values.host.kubeletDir -}}
{{- end -}}

{{/* The sharing configuration is given. */}}
{{- define "xpu-cdi.sharing" -}}
{{- if .Values.devicePlugin.config }}true{{ end -}}
{{- end -}}

{{/* A host path below a root (host.devRoot, host.driverRoot). */}}
{{- define "xpu-cdi.devPath" -}}
{{- $root := trimSuffix "/" .root -}}
{{- printf "%s%s" $root .path -}}
{{- end -}}

{{/* "true" when the installer keeps a partition layout: partitions.layout set, or the node label read. */}}
{{- define "xpu-cdi.partitions" -}}
{{- if and .Values.installer.enabled (or .Values.partitions.layout .Values.partitions.nodeLabel .Values.partitions.layouts) }}true{{ end -}}
{{- end }}

{{/* The image helm test's validator runs check-container in
(tests.image); "" for the chart's image. */}}
{{- define "xpu-cdi.testImage" -}}
{{- with .Values.tests.image -}}
{{- if .repository -}}
{{- printf "%s:%s" .repository (.tag | default "latest") -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The extended resource helm test's validator asks for one of, with the
device plugin: tests.resourceName; else devicePlugin.resourceName or, with
a layout the installer keeps and the mixed strategy, the partition size
resource of the layout's all=N entry (else its first entry): N=2 -48gb and
N=4 -24gb (P800), N=1 -16gb and N=3 -5gb (R200); then renamed as the
sharing configuration renames it (rename, or renameByDefault's .shared,
for an entry of more than one replica). */}}
{{- define "xpu-cdi.validatorResource" -}}
{{- $r := .Values.tests.resourceName -}}
{{- if not $r -}}
{{- $r = .Values.devicePlugin.resourceName -}}
{{- $layout := "" -}}
{{- if and (include "xpu-cdi.partitions" .) (eq .Values.devicePlugin.partitionStrategy "mixed") -}}
{{- $layout = .Values.partitions.layout -}}
{{- end -}}
{{- if $layout -}}
{{- $n := "" -}}
{{- range $e := splitList "," $layout -}}
{{- $kv := splitList "=" (trim $e) -}}
{{- if and (not $n) (eq (lower (first $kv)) "all") -}}{{- $n = last $kv -}}{{- end -}}
{{- end -}}
{{- if not $n -}}{{- $n = splitList "," $layout | first | splitList "=" | last | trim -}}{{- end -}}
{{- with get (dict "1" "16gb" "2" "48gb" "3" "5gb" "4" "24gb") $n -}}
{{- $r = printf "%s-%s" $r . -}}
{{- end -}}
{{- end -}}
{{- $byDefault := dig "sharing" "timeSlicing" "renameByDefault" false (.Values.devicePlugin.config | default dict) -}}
{{- range $e := dig "sharing" "timeSlicing" "resources" list (.Values.devicePlugin.config | default dict) -}}
{{- if and (eq ($e.name | toString) $r) (gt (int ($e.replicas | default 1)) 1) -}}
{{- if $e.rename -}}{{- $r = $e.rename -}}{{- else if $byDefault -}}{{- $r = printf "%s.shared" $r -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $r -}}
{{- end -}}

{{/* The milliseconds of a Go duration the schema accepted (10s, 1m30s,
500ms), as a float: (include "xpu-cdi.durationMS" "10s" | float64). */}}
{{- define "xpu-cdi.durationMS" -}}
{{- $ms := 0.0 -}}
{{- $units := dict "ns" 0.000001 "us" 0.001 "µs" 0.001 "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0 -}}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $part -}}
{{- $unit := trimPrefix $num $part -}}
{{- $ms = addf $ms (mulf (float64 $num) (get $units $unit)) -}}
{{- end -}}
{{- $ms -}}
{{- end -}}

{{/* The installer's file of named layouts (partitions.layouts), in the
form partition apply --config reads: a [NAME] line, then the layout. */}}
{{- define "xpu-cdi.partitionLayouts" -}}
{{- range $name, $layout := .Values.partitions.layouts }}
[{{ $name }}]
{{ $layout }}
{{- end }}
{{- end }}
