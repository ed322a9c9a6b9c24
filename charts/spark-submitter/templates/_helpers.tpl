{{/* Names, labels and shared pieces of the spark-submitter chart. */}}

{{- define "ss.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ss.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Names leave room for the longest suffix (-operator-leader, 16) within 63. */}}
{{- define "ss.base" -}}
{{- include "ss.fullname" . | trunc 46 | trimSuffix "-" -}}
{{- end -}}

{{- define "ss.submitter.fullname" -}}
{{- printf "%s-submitter" (include "ss.base" .) -}}
{{- end -}}

{{- define "ss.operator.fullname" -}}
{{- printf "%s-operator" (include "ss.base" .) -}}
{{- end -}}

{{- define "ss.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ss.labels" -}}
helm.sh/chart: {{ include "ss.chart" . }}
app.kubernetes.io/name: {{ include "ss.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: spark-submitter
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: include "ss.selector" (list . "submitter") */}}
{{- define "ss.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "ss.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "ss.componentLabels" -}}
{{- $root := index . 0 -}}
{{ include "ss.labels" $root }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "ss.submitter.serviceAccountName" -}}
{{- if .Values.submitter.serviceAccount.create -}}
{{- default (include "ss.submitter.fullname" .) .Values.submitter.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.submitter.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ss.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (include "ss.operator.fullname" .) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* An image reference: include "ss.image" (list . .Values.submitter.image) */}}
{{- define "ss.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $repo := printf "%s%s" $root.Values.image.registry $image.repository -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repo $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default $root.Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "ss.submitter.host" -}}
{{- printf "%s.%s.svc" (include "ss.submitter.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "ss.submitter.url" -}}
{{- printf "https://%s:%v" (include "ss.submitter.host" .) .Values.submitter.service.port -}}
{{- end -}}

{{/* The DNS names of the submitter's server certificate. */}}
{{- define "ss.submitter.dnsNames" -}}
{{- $svc := include "ss.submitter.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) -}}
{{- concat $names .Values.tls.additionalDNSNames | toJson -}}
{{- end -}}

{{- define "ss.operator.identity" -}}
{{- default (printf "%s.%s.svc" (include "ss.operator.fullname" .) .Release.Namespace) .Values.operator.clientIdentity -}}
{{- end -}}

{{- define "ss.kubeflow.namespace" -}}
{{- default .Release.Namespace .Values.kubeflowClient.namespace -}}
{{- end -}}

{{- define "ss.kubeflow.identity" -}}
{{- default (printf "kubeflow-spark-operator.%s.svc" (include "ss.kubeflow.namespace" .)) .Values.kubeflowClient.identity -}}
{{- end -}}

{{/* Secret names of the certificates. */}}
{{- define "ss.tls.caSecret" -}}
{{- printf "%s-ca" (include "ss.base" .) -}}
{{- end -}}

{{- define "ss.tls.serverSecret" -}}
{{- if eq .Values.tls.mode "existingSecrets" -}}
{{- required "tls.existingSecrets.server is required with tls.mode=existingSecrets" .Values.tls.existingSecrets.server -}}
{{- else -}}
{{- printf "%s-tls" (include "ss.submitter.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "ss.tls.operatorSecret" -}}
{{- if eq .Values.tls.mode "existingSecrets" -}}
{{- required "tls.existingSecrets.operatorClient is required with tls.mode=existingSecrets and operator.enabled" .Values.tls.existingSecrets.operatorClient -}}
{{- else -}}
{{- printf "%s-client-tls" (include "ss.operator.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "ss.tls.kubeflowSecret" -}}
{{- printf "%s-kubeflow-client-tls" (include "ss.base" .) -}}
{{- end -}}

{{/* Job namespaces as a list; empty means all namespaces. */}}
{{- define "ss.clusterWide" -}}
{{- if not .Values.jobNamespaces -}}true{{- end -}}
{{- end -}}

{{/* Service accounts a client may submit drivers as: include "ss.allowedSAs" (list . override) */}}
{{- define "ss.allowedSAs" -}}
{{- $root := index . 0 -}}
{{- $override := index . 1 -}}
{{- if $override -}}
{{- toJson $override -}}
{{- else -}}
{{- toJson (list $root.Values.spark.serviceAccount.name) -}}
{{- end -}}
{{- end -}}

{{/* The restricted security context of every container. */}}
{{- define "ss.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "ss.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* imagePullSecrets entries: names, or {name: ...} objects. */}}
{{- define "ss.pullSecrets" -}}
{{- range . }}
- name: {{ if kindIs "string" . }}{{ . }}{{ else }}{{ .name }}{{ end }}
{{- end }}
{{- end -}}

{{/* Egress to the API server and cluster DNS, shared by both NetworkPolicies. */}}
{{- define "ss.egress.apiAndDns" -}}
- ports:
{{- range .Values.networkPolicy.apiServer.ports }}
    - protocol: TCP
      port: {{ . }}
{{- end }}
{{- with .Values.networkPolicy.apiServer.cidrs }}
  to:
{{- range . }}
    - ipBlock:
        cidr: {{ . }}
{{- end }}
{{- end }}
{{- if .Values.networkPolicy.dns.enabled }}
- ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
  to:
    {{- toYaml .Values.networkPolicy.dns.to | nindent 4 }}
{{- end }}
{{- end -}}

{{/* The submitter's rules in a namespace it serves (see submitter/rbac.yaml). */}}
{{- define "ss.submitter.rules" -}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "create", "delete"]
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["configmaps", "services", "persistentvolumeclaims"]
  verbs: ["get", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "create", "patch", "delete"]
{{- if or .Values.operator.enabled .Values.kubeflowClient.enabled }}
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications/finalizers"]
  verbs: ["update"]
{{- end }}
{{- end -}}

{{- define "ss.operator.leaseName" -}}
{{- default (printf "%s-leader" (include "ss.operator.fullname" .)) .Values.operator.leaderElection.leaseName -}}
{{- end -}}

{{/* The operator's rules in a namespace it watches (see operator/rbac.yaml). */}}
{{- define "ss.operator.rules" -}}
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications/status"]
  verbs: ["update"]
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["scheduledsparkapplications"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["scheduledsparkapplications/status"]
  verbs: ["update"]
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkconnects"]
  verbs: ["list", "watch"]
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkconnects/status"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["resourcequotas"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "create"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["create"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create"]
- apiGroups: ["scheduling.volcano.sh", "scheduling.x-k8s.io"]
  resources: ["podgroups"]
  verbs: ["create"]
{{- if eq .Values.operator.recovery.store "kubernetes" }}
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "update", "patch"]
{{- end }}
{{- end -}}

{{/*
A kubernetes.io/tls Secret holding a leaf certificate signed by the chart's CA (tls.crt, tls.key,
ca.crt). The existing one is kept while it was signed by this CA and its renewal time has not
come; `spark-submitter.io/renew-after` (Unix seconds) records that time.
Arguments: dict root ca caCrt name namespace cn dnsNames component.
*/}}
{{- define "ss.tls.leafSecret" -}}
{{- $root := .root -}}
{{- $cfg := $root.Values.tls.selfSigned -}}
{{- $now := now | unixEpoch | int64 -}}
{{- $existing := lookup "v1" "Secret" .namespace .name -}}
{{- $keep := false -}}
{{- if and $existing $existing.data $existing.metadata.annotations -}}
{{- $renewAfter := index $existing.metadata.annotations "spark-submitter.io/renew-after" | default "0" | int64 -}}
{{- if and (eq (index $existing.data "ca.crt" | default "") .caCrt) (hasKey $existing.data "tls.crt") (hasKey $existing.data "tls.key") (gt $renewAfter $now) -}}
{{- $keep = true -}}
{{- end -}}
{{- end -}}
{{- $crt := "" -}}
{{- $key := "" -}}
{{- $renew := "" -}}
{{- if $keep -}}
{{- $crt = index $existing.data "tls.crt" -}}
{{- $key = index $existing.data "tls.key" -}}
{{- $renew = index $existing.metadata.annotations "spark-submitter.io/renew-after" -}}
{{- else -}}
{{- $cert := genSignedCertWithKey .cn nil .dnsNames (int $cfg.certDays) .ca (genPrivateKey "ecdsa") -}}
{{- $crt = $cert.Cert | b64enc -}}
{{- $key = $cert.Key | b64enc -}}
{{- $renew = add $now (mul (sub (int $cfg.certDays) (int $cfg.renewBeforeDays)) 86400) | toString -}}
{{- end -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "ss.componentLabels" (list $root .component) | nindent 4 }}
  annotations:
    spark-submitter.io/renew-after: {{ $renew | quote }}
type: kubernetes.io/tls
data:
  tls.crt: {{ $crt }}
  tls.key: {{ $key }}
  ca.crt: {{ .caCrt }}
{{- end -}}

{{/*
A cert-manager Certificate. Arguments: dict root issuer name secretName namespace cn dnsNames
usage component.
*/}}
{{- define "ss.tls.certificate" -}}
{{- $cm := .root.Values.tls.certManager -}}
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "ss.componentLabels" (list .root .component) | nindent 4 }}
spec:
  secretName: {{ .secretName }}
  commonName: {{ .cn }}
  dnsNames:
    {{- toYaml .dnsNames | nindent 4 }}
  duration: {{ $cm.duration }}
  renewBefore: {{ $cm.renewBefore }}
  usages:
    - digital signature
    - key encipherment
    - {{ .usage }}
  privateKey:
    algorithm: ECDSA
    size: 256
    encoding: PKCS8
    rotationPolicy: Always
  issuerRef:
    name: {{ .issuer.name }}
    kind: {{ .issuer.kind | default "Issuer" }}
    group: {{ .issuer.group | default "cert-manager.io" }}
{{- end -}}
