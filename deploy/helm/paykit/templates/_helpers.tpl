{{- define "paykit.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "paykit.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "paykit.labels" -}}
{{ include "paykit.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "paykit.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "paykit.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ default (include "paykit.fullname" .) .Values.serviceAccount.name }}
{{- else -}}
{{ default "default" .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{/* The Secret of the release for what is given inline, which the API and the workers read. */}}
{{- define "paykit.secretName" -}}
{{ include "paykit.fullname" . }}-secrets
{{- end -}}

{{/* The hook Secret the migration Job reads when its DSN is given inline; deleted once the hooks have run. */}}
{{- define "paykit.migrateSecretName" -}}
{{ include "paykit.fullname" . }}-migrate
{{- end -}}

{{/* The DSN the migration Job has in its hook Secret, if it is given inline: its own, or else the API's. */}}
{{- define "paykit.migrateInlineDSN" -}}
{{- with .Values.mysql.migrate -}}
{{- if .existingSecret -}}
{{- else if .dsn -}}
{{ .dsn }}
{{- else if not $.Values.mysql.existingSecret -}}
{{ $.Values.mysql.dsn }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Where the migration Job's PAYKIT_MYSQL_DSN is: a secretKeyRef's name and key. */}}
{{- define "paykit.migrateDSNRef" -}}
{{- if .Values.mysql.migrate.existingSecret -}}
name: {{ .Values.mysql.migrate.existingSecret }}
key: {{ .Values.mysql.migrate.key }}
{{- else if include "paykit.migrateInlineDSN" . -}}
name: {{ include "paykit.migrateSecretName" . }}
key: dsn
{{- else -}}
name: {{ .Values.mysql.existingSecret }}
key: {{ .Values.mysql.key }}
{{- end -}}
{{- end -}}

{{- define "paykit.alipaySecret" -}}
{{ .Values.alipay.existingSecret | default (include "paykit.secretName" .) }}
{{- end -}}

{{/* Certificate mode (公钥证书模式): the three certificates from alipay.certificates.existingSecret. */}}
{{- define "paykit.alipayCertMode" -}}
{{- if .Values.alipay.certificates.existingSecret -}}true{{- end -}}
{{- end -}}

{{- define "paykit.temporalTLS" -}}
{{- if or .Values.temporal.tls.enabled .Values.temporal.tls.existingSecret .Values.temporal.apiKey.existingSecret -}}true{{- end -}}
{{- end -}}

{{/*
What each paykit command reads: the API and the workers everything; temporal-setup only
Temporal (the namespace and the search attributes); migrate only the database
(internal/system/migrate.go). A container gets only the secrets its command reads
(tools/helmcheck checks it).
*/}}
{{- define "paykit.reads" -}}
{{- $reads := dict "api" (list "app" "temporal") "worker" (list "app" "temporal") "temporal-setup" (list "temporal") "migrate" (list "migrate") -}}
{{- join "," (required (printf "no paykit command %q" .cmd) (get $reads .cmd)) -}}
{{- end -}}

{{/* The environment of a paykit container: $ is the root context, .cmd the paykit command. */}}
{{- define "paykit.env" -}}
{{- $ := .root -}}
{{- $reads := splitList "," (include "paykit.reads" .) -}}
- name: PAYKIT_LOG_FORMAT
  value: json
- name: PAYKIT_LOG_LEVEL
  value: {{ $.Values.logLevel | quote }}
{{- if has "migrate" $reads }}
- name: PAYKIT_MYSQL_DSN
  valueFrom:
    secretKeyRef:
      {{- include "paykit.migrateDSNRef" $ | nindent 6 }}
{{- end }}
{{- if has "app" $reads }}
- name: PAYKIT_MYSQL_DSN
  valueFrom:
    secretKeyRef:
      name: {{ $.Values.mysql.existingSecret | default (include "paykit.secretName" $) }}
      key: {{ $.Values.mysql.key }}
{{- if or $.Values.redis.addr $.Values.redis.existingSecret }}
- name: PAYKIT_REDIS_ADDR
  valueFrom:
    secretKeyRef:
      name: {{ $.Values.redis.existingSecret | default (include "paykit.secretName" $) }}
      key: {{ $.Values.redis.key }}
{{- else }}
{{- /* No Redis given: say so, rather than let paykit try its default 127.0.0.1:6379. */}}
- name: PAYKIT_REDIS_ADDR
  value: "off"
{{- end }}
{{- if $.Values.redis.cluster }}
- name: PAYKIT_REDIS_CLUSTER
  value: "true"
{{- end }}
{{- with $.Values.redis.masterName }}
- name: PAYKIT_REDIS_MASTER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if or $.Values.keyring.keys $.Values.keyring.existingSecret }}
- name: PAYKIT_SECRETS_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ $.Values.keyring.existingSecret | default (include "paykit.secretName" $) }}
      key: {{ $.Values.keyring.key }}
{{- end }}
{{- end }}
{{- if has "temporal" $reads }}
- name: PAYKIT_TEMPORAL_ADDR
  value: {{ $.Values.temporal.address | quote }}
- name: PAYKIT_TEMPORAL_NAMESPACE
  value: {{ $.Values.temporal.namespace | quote }}
- name: PAYKIT_TASK_QUEUE
  value: {{ $.Values.temporal.taskQueue | quote }}
{{- if include "paykit.temporalTLS" $ }}
- name: PAYKIT_TEMPORAL_TLS
  value: "true"
{{- end }}
{{- with $.Values.temporal.tls.serverName }}
- name: PAYKIT_TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if $.Values.temporal.tls.existingSecret }}
{{- if $.Values.temporal.tls.hasCA }}
- name: PAYKIT_TEMPORAL_TLS_CA_FILE
  value: /etc/paykit/temporal-tls/ca.crt
{{- end }}
{{- if $.Values.temporal.tls.clientCertificate }}
- name: PAYKIT_TEMPORAL_TLS_CERT_FILE
  value: /etc/paykit/temporal-tls/tls.crt
- name: PAYKIT_TEMPORAL_TLS_KEY_FILE
  value: /etc/paykit/temporal-tls/tls.key
{{- end }}
{{- end }}
{{- if $.Values.temporal.apiKey.existingSecret }}
- name: PAYKIT_TEMPORAL_API_KEY_FILE
  value: /etc/paykit/temporal-api-key/{{ $.Values.temporal.apiKey.key }}
{{- end }}
{{- end }}
{{- if has "app" $reads }}
- name: PAYKIT_HTTP_ADDR
  value: {{ printf "0.0.0.0:%v" $.Values.api.port | quote }}
- name: PAYKIT_API_ADMIN_ADDR
  value: {{ printf "0.0.0.0:%v" $.Values.api.adminPort | quote }}
- name: PAYKIT_WORKER_ADMIN_ADDR
  value: {{ printf "0.0.0.0:%v" $.Values.worker.adminPort | quote }}
- name: PAYKIT_PUBLIC_URL
  value: {{ required "publicUrl: how Alipay reaches the API (its notify_url is publicUrl/callbacks/alipay)" $.Values.publicUrl | quote }}
- name: ALIPAY_APP_ID
  value: {{ required "alipay.appId: the deployment's default Alipay app" $.Values.alipay.appId | quote }}
- name: ALIPAY_SELLER_ID
  value: {{ required "alipay.sellerId: the seller (2088…) the default app's payments go to" $.Values.alipay.sellerId | quote }}
- name: ALIPAY_GATEWAY_URL
  value: {{ $.Values.alipay.gatewayUrl | quote }}
- name: ALIPAY_APP_PRIVATE_KEY_FILE
  value: /etc/paykit/alipay/app_private_key.pem
{{- if include "paykit.alipayCertMode" $ }}
- name: ALIPAY_APP_CERT_FILE
  value: /etc/paykit/alipay-certs/appCertPublicKey.crt
- name: ALIPAY_PUBLIC_CERT_FILE
  value: /etc/paykit/alipay-certs/alipayCertPublicKey_RSA2.crt
- name: ALIPAY_ROOT_CERT_FILE
  value: /etc/paykit/alipay-certs/alipayRootCert.crt
{{- else }}
- name: ALIPAY_PUBLIC_KEY_FILE
  value: /etc/paykit/alipay/alipay_public_key.pem
{{- end }}
{{- end }}
{{- range $k, $v := $.Values.env }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- with $.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The volume mounts of a paykit container: $ is the root context, .cmd the paykit command. */}}
{{- define "paykit.volumeMounts" -}}
{{- $ := .root -}}
{{- $reads := splitList "," (include "paykit.reads" .) -}}
- name: tmp
  mountPath: /tmp
{{- if has "app" $reads }}
- name: alipay
  mountPath: /etc/paykit/alipay
  readOnly: true
{{- if include "paykit.alipayCertMode" $ }}
- name: alipay-certs
  mountPath: /etc/paykit/alipay-certs
  readOnly: true
{{- end }}
{{- end }}
{{- if has "temporal" $reads }}
{{- if $.Values.temporal.tls.existingSecret }}
- name: temporal-tls
  mountPath: /etc/paykit/temporal-tls
  readOnly: true
{{- end }}
{{- if $.Values.temporal.apiKey.existingSecret }}
- name: temporal-api-key
  mountPath: /etc/paykit/temporal-api-key
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{/* The volumes of a paykit pod: $ is the root context, .cmd the paykit command. */}}
{{- define "paykit.volumes" -}}
{{- $ := .root -}}
{{- $reads := splitList "," (include "paykit.reads" .) -}}
- name: tmp
  emptyDir: {}
{{- if has "app" $reads }}
- name: alipay
  secret:
    secretName: {{ include "paykit.alipaySecret" $ }}
    defaultMode: 0440
    items:
      - key: app_private_key.pem
        path: app_private_key.pem
      {{- if not (include "paykit.alipayCertMode" $) }}
      - key: alipay_public_key.pem
        path: alipay_public_key.pem
      {{- end }}
{{- with $.Values.alipay.certificates }}
{{- if .existingSecret }}
- name: alipay-certs
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ .appCertKey }}
        path: appCertPublicKey.crt
      - key: {{ .alipayCertKey }}
        path: alipayCertPublicKey_RSA2.crt
      - key: {{ .rootCertKey }}
        path: alipayRootCert.crt
{{- end }}
{{- end }}
{{- end }}
{{- if has "temporal" $reads }}
{{- if $.Values.temporal.tls.existingSecret }}
- name: temporal-tls
  secret:
    secretName: {{ $.Values.temporal.tls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- if $.Values.temporal.apiKey.existingSecret }}
- name: temporal-api-key
  secret:
    secretName: {{ $.Values.temporal.apiKey.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end }}
{{- end -}}

{{/* The pod spec of a paykit Job run as a hook: $ is the root context, .name the command. */}}
{{- define "paykit.jobPod" -}}
{{- $ := .root -}}
{{- $cmd := dict "root" $ "cmd" .name -}}
{{- if and (not $.Values.serviceAccount.create) $.Values.serviceAccount.name }}
serviceAccountName: {{ $.Values.serviceAccount.name }}
{{- end }}
automountServiceAccountToken: false
restartPolicy: Never
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $.Values.podSecurityContext | nindent 2 }}
containers:
  - name: {{ .name }}
    image: {{ include "paykit.image" $ }}
    imagePullPolicy: {{ $.Values.image.pullPolicy }}
    args: [{{ .name | quote }}]
    env:
      {{- include "paykit.env" $cmd | nindent 6 }}
    volumeMounts:
      {{- include "paykit.volumeMounts" $cmd | nindent 6 }}
    resources:
      {{- toYaml .resources | nindent 6 }}
    securityContext:
      {{- toYaml $.Values.securityContext | nindent 6 }}
volumes:
  {{- include "paykit.volumes" $cmd | nindent 2 }}
{{- end -}}

{{/* The Worker Deployment the versioned workers poll as: worker.versioning.deploymentName, or paykit-<task queue> as paykit itself defaults it. */}}
{{- define "paykit.workerDeploymentName" -}}
{{- .Values.worker.versioning.deploymentName | default (printf "paykit-%s" (.Values.temporal.taskQueue | replace "." "-")) -}}
{{- end -}}

{{/*
The worker Deployments to render, as a YAML list of {name, buildId, image, replicas}:
without versioning the one worker Deployment as before; with it one per worker.versions
entry, refused unless each names a distinct build id that can name a Deployment.
*/}}
{{- define "paykit.workers" -}}
{{- range $k := list "PAYKIT_WORKER_VERSIONING" "PAYKIT_WORKER_DEPLOYMENT" "PAYKIT_WORKER_BUILD_ID" -}}
{{- if hasKey $.Values.env $k -}}
{{- fail (printf "env.%s: set worker.versioning and worker.versions instead" $k) -}}
{{- end -}}
{{- end -}}
{{- $workers := list -}}
{{- if not .Values.worker.versioning.enabled -}}
{{- if .Values.worker.versions -}}
{{- fail "worker.versions: each build runs as a Worker Deployment Version; set worker.versioning.enabled" -}}
{{- end -}}
{{- $workers = append $workers (dict "name" "worker" "buildId" "" "image" (include "paykit.image" .) "replicas" .Values.worker.replicas) -}}
{{- else -}}
{{- if not .Values.worker.versions -}}
{{- fail "worker.versioning.enabled: list the builds to run in worker.versions (at least one: {buildId, tag})" -}}
{{- end -}}
{{- $seen := dict -}}
{{- range .Values.worker.versions -}}
{{- $id := toString (required "worker.versions: every entry needs a buildId" .buildId) -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$" $id) -}}
{{- fail (printf "worker.versions: buildId %q: lower-case letters, digits and '-', at most 32, no dots (it names the worker's Deployment and its Worker Deployment Version)" $id) -}}
{{- end -}}
{{- if hasKey $seen $id -}}
{{- fail (printf "worker.versions: buildId %q listed twice" $id) -}}
{{- end -}}
{{- $_ := set $seen $id true -}}
{{- $tag := .tag | default $.Values.image.tag | default $.Chart.AppVersion -}}
{{- $replicas := ternary .replicas $.Values.worker.replicas (hasKey . "replicas") -}}
{{- $workers = append $workers (dict "name" (printf "worker-%s" $id) "buildId" $id "image" (printf "%s:%s" $.Values.image.repository $tag) "replicas" $replicas) -}}
{{- end -}}
{{- end -}}
{{- toYaml $workers -}}
{{- end -}}
