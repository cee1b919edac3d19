{{/*
The Service and ServiceMonitor of a daemon's own metrics (GET /metrics on
its health port). dict: root, app (app.kubernetes.io/name of its pods),
suffix (of the objects' names), port (the health port), sm (its
serviceMonitor values). The Service is headless: Prometheus scrapes every
pod's endpoint, on the host network the node's address.
*/}}
{{- define "xpu-cdi.daemonMetrics" -}}
{{- $root := .root }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "xpu-cdi.fullname" $root }}-{{ .suffix }}-metrics
  namespace: {{ $root.Release.Namespace | quote }}
  labels:
    {{- include "xpu-cdi.labels" $root | nindent 4 }}
    app.kubernetes.io/name: {{ .app }}
    app.kubernetes.io/component: metrics
spec:
  clusterIP: None
  selector:
    app.kubernetes.io/name: {{ .app }}
    app.kubernetes.io/instance: {{ $root.Release.Name | quote }}
  ports:
    - name: metrics
      port: {{ .port }}
      targetPort: {{ .port }}
      protocol: TCP
---
# For the Prometheus operator: scrape every pod of the daemon through the
# Service, with the node's name as the label node.
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "xpu-cdi.fullname" $root }}-{{ .suffix }}
  namespace: {{ $root.Release.Namespace | quote }}
  labels:
    {{- include "xpu-cdi.labels" $root | nindent 4 }}
    app.kubernetes.io/name: {{ .app }}
    {{- with .sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .app }}
      app.kubernetes.io/component: metrics
      app.kubernetes.io/instance: {{ $root.Release.Name | quote }}
  namespaceSelector:
    matchNames: [{{ $root.Release.Namespace | quote }}]
  endpoints:
    - port: metrics
      path: /metrics
      interval: {{ .sm.interval | quote }}
      relabelings:
        - sourceLabels: [__meta_kubernetes_pod_node_name]
          targetLabel: node
{{- end }}
