{{/*
Chart name, truncated to the 63 characters a DNS label allows.
*/}}
{{- define "lance-flight.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name. The release name is used as is when it already contains the chart name.
Truncated to 54 characters so that suffixes such as "-headless" still fit in 63.
*/}}
{{- define "lance-flight.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 54 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 54 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 54 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lance-flight.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lance-flight.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lance-flight.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "lance-flight.labels" -}}
helm.sh/chart: {{ include "lance-flight.chart" . }}
{{ include "lance-flight.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: server
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "lance-flight.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lance-flight.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "lance-flight.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Where the chart mounts what it manages inside the container. */}}
{{- define "lance-flight.configDir" -}}/etc/lance-flight{{- end }}
{{- define "lance-flight.configPath" -}}{{ include "lance-flight.configDir" . }}/config.yaml{{- end }}
{{- define "lance-flight.authDir" -}}{{ include "lance-flight.configDir" . }}/auth{{- end }}
{{- define "lance-flight.tlsDir" -}}{{ include "lance-flight.configDir" . }}/tls{{- end }}

{{/* Secret names: the user's existing Secret, else the one this chart renders. */}}
{{- define "lance-flight.s3SecretName" -}}
{{- default (printf "%s-s3" (include "lance-flight.fullname" .)) .Values.secrets.s3.existingSecret }}
{{- end }}
{{- define "lance-flight.authSecretName" -}}
{{- default (printf "%s-auth" (include "lance-flight.fullname" .)) .Values.secrets.auth.existingSecret }}
{{- end }}
{{- define "lance-flight.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "lance-flight.fullname" .)) .Values.secrets.tls.existingSecret }}
{{- end }}

{{/* Which secret-backed features are on ("true" or ""). */}}
{{- define "lance-flight.s3Enabled" -}}
{{- if or .Values.secrets.s3.existingSecret .Values.secrets.s3.accessKeyId }}true{{ end }}
{{- end }}
{{- define "lance-flight.authEnabled" -}}
{{- if or .Values.secrets.auth.existingSecret .Values.secrets.auth.tokens }}true{{ end }}
{{- end }}
{{- define "lance-flight.tlsEnabled" -}}
{{- if or .Values.secrets.tls.existingSecret .Values.secrets.tls.cert }}true{{ end }}
{{- end }}

{{/*
The server's config file: .Values.config with the paths of chart-managed secrets filled in.
*/}}
{{- define "lance-flight.config" -}}
{{- $config := deepCopy .Values.config }}
{{- if include "lance-flight.authEnabled" . }}
{{- $_ := set $config.auth "tokensFile" (printf "%s/tokens" (include "lance-flight.authDir" .)) }}
{{- end }}
{{- if include "lance-flight.tlsEnabled" . }}
{{- $tlsDir := include "lance-flight.tlsDir" . }}
{{- $_ := set $config.tls "certFile" (printf "%s/tls.crt" $tlsDir) }}
{{- $_ := set $config.tls "keyFile" (printf "%s/tls.key" $tlsDir) }}
{{- if .Values.secrets.tls.verifyClient }}
{{- $_ := set $config.tls "clientCaFile" (printf "%s/ca.crt" $tlsDir) }}
{{- end }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* grpc or grpc+tls, as the server will speak. */}}
{{- define "lance-flight.scheme" -}}
{{- if or (include "lance-flight.tlsEnabled" .) .Values.config.tls.certFile }}grpc+tls{{ else }}grpc{{ end }}
{{- end }}

{{/* Every worker's location on this pod, comma-separated (worker k listens on port + k). */}}
{{- define "lance-flight.advertise" -}}
{{- $scheme := include "lance-flight.scheme" . }}
{{- $locations := list }}
{{- range $k := until (int .Values.config.workers) }}
{{- $locations = append $locations (printf "%s://%s:%d" $scheme $.Values.advertiseHost (add (int $.Values.config.port) $k)) }}
{{- end }}
{{- join "," $locations }}
{{- end }}

{{/* Fail early on combinations the schema cannot express. */}}
{{- define "lance-flight.validate" -}}
{{- if and .Values.secrets.s3.accessKeyId (not .Values.secrets.s3.secretAccessKey) (not .Values.secrets.s3.existingSecret) }}
{{- fail "secrets.s3.accessKeyId is set but secrets.s3.secretAccessKey is empty" }}
{{- end }}
{{- if and .Values.secrets.tls.cert (not .Values.secrets.tls.key) (not .Values.secrets.tls.existingSecret) }}
{{- fail "secrets.tls.cert is set but secrets.tls.key is empty" }}
{{- end }}
{{- if and .Values.secrets.tls.verifyClient (not (include "lance-flight.tlsEnabled" .)) }}
{{- fail "secrets.tls.verifyClient needs TLS: set secrets.tls.existingSecret or secrets.tls.cert/key" }}
{{- end }}
{{- if and .Values.secrets.tls.verifyClient .Values.secrets.tls.cert (not .Values.secrets.tls.clientCa) (not .Values.secrets.tls.existingSecret) }}
{{- fail "secrets.tls.verifyClient with inline certificates needs secrets.tls.clientCa" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (not (kindIs "invalid" .Values.podDisruptionBudget.minAvailable)) (not (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable)) }}
{{- fail "podDisruptionBudget: set only one of minAvailable and maxUnavailable" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) }}
{{- fail "autoscaling.maxReplicas must be >= autoscaling.minReplicas" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (not .Values.autoscaling.targetCPUUtilizationPercentage) (not .Values.autoscaling.targetMemoryUtilizationPercentage) }}
{{- fail "autoscaling needs targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage" }}
{{- end }}
{{- if ge (float64 (default 0 .Values.config.shutdownGraceSeconds)) (float64 .Values.terminationGracePeriodSeconds) }}
{{- fail "config.shutdownGraceSeconds must be below terminationGracePeriodSeconds (the kubelet kills the pod then)" }}
{{- end }}
{{- if eq (int .Values.service.metricsPort) (int .Values.service.flightPort) }}
{{- fail "service.metricsPort and service.flightPort must differ" }}
{{- end }}
{{- $lastWorkerPort := add (int .Values.config.port) (sub (int .Values.config.workers) 1) }}
{{- if and (ge (int .Values.config.metricsPort) (int .Values.config.port)) (le (int .Values.config.metricsPort) (int $lastWorkerPort)) }}
{{- fail (printf "config.metricsPort %d collides with the Flight worker ports %d-%d" (int .Values.config.metricsPort) (int .Values.config.port) (int $lastWorkerPort)) }}
{{- end }}
{{- end }}
