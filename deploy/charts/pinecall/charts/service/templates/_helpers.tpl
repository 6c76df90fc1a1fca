{{/*
The generic service chart's helpers. An alias of this chart is one service; a worker service
renders one Deployment per "instance" (environment and role), an HTTP service one.
*/}}

{{- define "service.name" -}}
{{- .Values.name | default .Chart.Name -}}
{{- end -}}

{{- define "service.fullname" -}}
{{- printf "%s-%s" .Release.Name (include "service.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Another service of the release, by name: its Service's name. */}}
{{- define "service.peer" -}}
{{- printf "%s-%s" .root.Release.Name .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "service.image" -}}
{{- $g := .Values.global.image | default dict -}}
{{- $name := printf "pinecall-%s" (.Values.image.name | default (include "service.name" .)) -}}
{{- $repo := .Values.image.repository | default (ternary (printf "%s/%s" $g.registry $name) $name (not (empty $g.registry))) -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default $g.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{- define "service.selectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/name: {{ include "service.name" . }}
{{- end -}}

{{/* On a pod: which of the platform's stores it is a client of, for their NetworkPolicies. */}}
{{- define "service.clientLabels" -}}
{{- if has "postgres" .Values.uses }}
pinecall.dev/postgres-client: "true"
{{- end }}
{{- if has "nats" .Values.uses }}
pinecall.dev/nats-client: "true"
{{- end }}
{{- end -}}

{{- define "service.labels" -}}
{{ include "service.selectorLabels" . }}
app.kubernetes.io/part-of: pinecall
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
The Deployments of this service as a list: name, role (http, plain, core or scaled),
environment, replicas (none for scaled: KEDA sets them), seats, most, least.
*/}}
{{- define "service.instances" -}}
{{- $full := include "service.fullname" . -}}
{{- $out := list -}}
{{- if eq .Values.kind "http" -}}
{{- $out = append $out (dict "name" $full "role" "http" "environment" "" "replicas" .Values.replicas) -}}
{{- else -}}
{{- range $env, $i := .Values.worker.environments -}}
{{- if $i -}}
{{- $out = append $out (dict "name" (printf "%s-%s" $full $env) "role" "plain" "environment" $env "replicas" $i.replicas "seats" $i.seats) -}}
{{- end -}}
{{- end -}}
{{- range $env, $i := .Values.worker.core -}}
{{- if $i -}}
{{- $out = append $out (dict "name" (printf "%s-core-%s" $full $env) "role" "core" "environment" $env "replicas" $i.replicas "seats" $i.seats) -}}
{{- end -}}
{{- end -}}
{{- range $env, $i := .Values.worker.scaled -}}
{{- if $i -}}
{{- $out = append $out (dict "name" (printf "%s-scaled-%s" $full $env) "role" "scaled" "environment" $env "seats" $i.seats "most" $i.most "least" ($i.least | default 0)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* An environment's block of global.environments; fails on an environment not declared. */}}
{{- define "service.environment" -}}
{{- $e := index .root.Values.global.environments .environment -}}
{{- if not $e -}}
{{- fail (printf "%s: environment %q is not in global.environments" (include "service.name" .root) .environment) -}}
{{- end -}}
{{- toYaml $e -}}
{{- end -}}

{{/* The URL of a service of the release from inside the cluster. */}}
{{- define "service.url" -}}
{{- $port := index .root.Values.global.ports .name -}}
{{- printf "http://%s.%s.svc:%v" (include "service.peer" .) .root.Release.Namespace $port -}}
{{- end -}}

{{- define "service.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: {{ .key }}
      {{- if .optional }}
      optional: true
      {{- end }}
{{- end -}}

{{/*
The container's environment: what every service gets, what it uses, its instance's
environment for a worker, then its own env and secretEnv.
*/}}
{{- define "service.env" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $g := $v.global -}}
{{- $i := .instance -}}
{{- $uses := $v.uses -}}
- name: PINECALL_LOG_FORMAT
  value: json
- name: PINECALL_LOG_LEVEL
  value: {{ $g.logLevel | default "INFO" | quote }}
- name: PINECALL_NATS_NAMESPACE
  value: {{ $g.natsNamespace | quote }}
{{- if eq $v.kind "http" }}
- name: PINECALL_HOST
  value: "0.0.0.0"
- name: PINECALL_PORT
  value: {{ $v.port | quote }}
{{- else }}
- name: PINECALL_HEALTH_PORT
  value: {{ $v.port | quote }}
- name: PINECALL_WORKER_HOST
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: HOME
  value: /tmp
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ include "service.name" $root }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "k8s.namespace.name=%s,service.namespace=pinecall%s" $root.Release.Namespace (ternary (printf ",deployment.environment=%s" $i.environment) "" (not (empty $i.environment))) | quote }}
{{- with $g.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- if has "postgres" $uses }}
{{ include "service.secretEnv" (dict "name" "PINECALL_DATABASE_URL" "secret" $g.secrets.database "key" "uri") }}
{{- end }}
{{- if has "nats" $uses }}
{{ include "service.secretEnv" (dict "name" "PINECALL_NATS_URL" "secret" $g.secrets.nats "key" "url") }}
{{- end }}
{{- if has "roster" $uses }}
- name: PINECALL_ROSTER_URL
  value: {{ include "service.url" (dict "root" $root "name" "roster") }}
{{- end }}
{{- if has "call-log" $uses }}
- name: PINECALL_CALL_LOG_URL
  value: {{ include "service.url" (dict "root" $root "name" "call-log") }}
{{- end }}
{{- if $i.environment }}
{{- $e := include "service.environment" (dict "root" $root "environment" $i.environment) | fromYaml }}
- name: PINECALL_FLEET
  value: {{ $e.fleet | quote }}
{{ include "service.secretEnv" (dict "name" "PINECALL_FLEET_KEY" "secret" $g.secrets.fleetKeys "key" $i.environment) }}
{{- if $i.seats }}
- name: PINECALL_MAX_JOBS
  value: {{ $i.seats | quote }}
{{- end }}
- name: LIVEKIT_URL
  value: {{ $e.livekit.url | quote }}
{{ include "service.secretEnv" (dict "name" "LIVEKIT_API_KEY" "secret" $e.livekit.secret "key" "api-key") }}
{{ include "service.secretEnv" (dict "name" "LIVEKIT_API_SECRET" "secret" $e.livekit.secret "key" "api-secret") }}
{{- end }}
{{- if eq $v.kind "worker" }}
{{- range $name, $key := $g.vendors.keys }}
{{ include "service.secretEnv" (dict "name" $name "secret" $g.secrets.vendors "key" $key "optional" true) }}
{{- end }}
{{- range $name, $value := $g.vendors.urls }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- if and (has "recordings" $uses) $g.recordings.bucket }}
{{- $r := $g.recordings }}
- name: PINECALL_RECORDINGS_BUCKET
  value: {{ $r.bucket | quote }}
- name: PINECALL_RECORDINGS_PREFIX
  value: {{ $r.prefix | default "recordings" | quote }}
- name: PINECALL_RECORDINGS_REGION
  value: {{ $r.region | default "us-east-1" | quote }}
- name: PINECALL_RECORDINGS_URL_TTL_S
  value: {{ $r.urlTtlS | default 300 | quote }}
{{- with $r.endpoint }}
- name: PINECALL_RECORDINGS_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- if $r.hmacKeys }}
{{ include "service.secretEnv" (dict "name" "PINECALL_RECORDINGS_ACCESS_KEY_ID" "secret" $g.secrets.recordings "key" "access-key-id") }}
{{ include "service.secretEnv" (dict "name" "PINECALL_RECORDINGS_SECRET_ACCESS_KEY" "secret" $g.secrets.recordings "key" "secret-access-key") }}
{{- end }}
{{- end }}
{{- range $name, $value := $v.env }}
- name: {{ $name }}
  value: {{ tpl (toString $value) $root | quote }}
{{- end }}
{{- range $name, $ref := $v.secretEnv }}
{{ include "service.secretEnv" (dict "name" $name "secret" (tpl $ref.secret $root) "key" $ref.key) }}
{{- end }}
{{- end -}}

{{/*
checkov's findings this chart answers by design, waived in place (the `checkov.io/skip<N>`
annotations checkov reads on the resource), each with its reason.
*/}}
{{- define "service.checkovWaivers" -}}
checkov.io/skip1: CKV_K8S_43=Images are pinned per release by image.digest where the registry gives one; the chart's default is the release's tag.
checkov.io/skip2: CKV_K8S_35=Every setting is an environment variable by design (shared/CONVENTIONS.md habit 3); the secret ones are projected from Secrets, never written in a manifest.
checkov.io/skip3: CKV_K8S_15=IfNotPresent with immutable release tags (or a digest) pulls each image once a node; Always would make a node's restart wait on the registry.
{{- end -}}
