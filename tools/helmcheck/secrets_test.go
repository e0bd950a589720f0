package main

import (
	"strings"
	"testing"
)

// pod is a Deployment or a hook Job running paykit cmd, with the container's env and
// volumeMounts and the pod's volumes given as YAML flow sequences.
func pod(kind, name, cmd, annotations, env, mounts, volumes string) string {
	apiVersion := "apps/v1"
	spec := "  selector: {matchLabels: {app.kubernetes.io/component: " + cmd + "}}\n"
	if kind == "Job" {
		apiVersion = "batch/v1"
		spec = ""
	}
	return "apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n  annotations: " + annotations + "\nspec:\n" + spec +
		"  template:\n    metadata: {labels: {app.kubernetes.io/component: " + cmd + "}}\n    spec:\n      containers:\n" +
		"        - name: " + cmd + "\n          image: paykit\n          args: [" + cmd + "]\n" +
		"          env: " + env + "\n          volumeMounts: " + mounts + "\n      volumes: " + volumes + "\n"
}

const (
	dsnEnv       = "{name: PAYKIT_MYSQL_DSN, valueFrom: {secretKeyRef: {name: paykit, key: mysql-dsn}}}"
	keyringEnv   = "{name: PAYKIT_SECRETS_KEYS, valueFrom: {secretKeyRef: {name: paykit, key: secrets-keys}}}"
	alipayEnv    = "{name: ALIPAY_APP_PRIVATE_KEY_FILE, value: /etc/paykit/alipay/app_private_key.pem}"
	alipayMount  = "{name: alipay, mountPath: /etc/paykit/alipay}"
	alipayVolume = "{name: alipay, secret: {secretName: paykit, items: [{key: app_private_key.pem, path: app_private_key.pem}]}}"
	hookJob      = "{helm.sh/hook: 'pre-install,pre-upgrade', helm.sh/hook-weight: '0'}"
)

// errorsOf decodes the documents and returns what one check finds in them.
func errorsOf(t *testing.T, doc string, find func(rendered) []error) string {
	t.Helper()
	r, errs := check([]byte(doc), nil, intent{})
	for _, e := range errs {
		if strings.Contains(e.Error(), "document") {
			t.Fatalf("%v\n%s", e, doc)
		}
	}
	var got []string
	for _, e := range find(r) {
		got = append(got, e.Error())
	}
	return strings.Join(got, "; ")
}

func podSecrets(r rendered) []error {
	var errs []error
	for _, w := range r.workloads() {
		errs = append(errs, podSecretErrors(w.cmd, w.pod)...)
	}
	return errs
}

// Each container gets the secrets its command reads and no other: temporal-setup neither
// the DSN, nor the keyring, nor the Alipay keys; migrate the DSN alone. A file variable
// names a file its mounts hold, and a mounted Secret is read.
func TestEachContainerGetsOnlyTheSecretsItsCommandReads(t *testing.T) {
	for name, tc := range map[string]struct {
		doc, wantErr string
	}{
		"migrate with the DSN": {pod("Job", "m", "migrate", hookJob, "["+dsnEnv+"]", "[]", "[]"), ""},
		"migrate with the keyring": {pod("Job", "m", "migrate", hookJob, "["+dsnEnv+", "+keyringEnv+"]", "[]", "[]"),
			"container migrate gets the keyring (PAYKIT_SECRETS_KEYS from Secret paykit key secrets-keys), which paykit migrate does not read"},
		"migrate with the Alipay keys": {pod("Job", "m", "migrate", hookJob, "["+dsnEnv+", "+alipayEnv+"]", "["+alipayMount+"]", "["+alipayVolume+"]"),
			"gets the Alipay keys (ALIPAY_APP_PRIVATE_KEY_FILE in Secret paykit), which paykit migrate does not read"},
		"migrate without the DSN": {pod("Job", "m", "migrate", hookJob, "[]", "[]", "[]"), "gets no MySQL DSN, which paykit migrate needs"},
		"temporal-setup with the DSN": {pod("Job", "t", "temporal-setup", hookJob, "["+dsnEnv+"]", "[]", "[]"),
			"gets the MySQL DSN (PAYKIT_MYSQL_DSN from Secret paykit key mysql-dsn), which paykit temporal-setup does not read"},
		"temporal-setup with the Alipay Secret mounted": {pod("Job", "t", "temporal-setup", hookJob, "[]", "["+alipayMount+"]", "["+alipayVolume+"]"),
			"mounts Secret paykit at /etc/paykit/alipay, and no variable names a file of it"},
		"temporal-setup with its API key": {pod("Job", "t", "temporal-setup", hookJob,
			"[{name: PAYKIT_TEMPORAL_API_KEY_FILE, value: /etc/paykit/temporal-api-key/api-key}]",
			"[{name: k, mountPath: /etc/paykit/temporal-api-key}]", "[{name: k, secret: {secretName: cloud}}]"), ""},
		"api with what it needs":      {pod("Deployment", "a", "api", "{}", "["+dsnEnv+", "+keyringEnv+", "+alipayEnv+"]", "["+alipayMount+"]", "["+alipayVolume+"]"), ""},
		"api without the Alipay keys": {pod("Deployment", "a", "api", "{}", "["+dsnEnv+"]", "[]", "[]"), "gets no Alipay keys, which paykit api needs"},
		"a file in no mount": {pod("Deployment", "a", "api", "{}", "["+dsnEnv+", "+alipayEnv+"]", "[]", "["+alipayVolume+"]"),
			"ALIPAY_APP_PRIVATE_KEY_FILE=/etc/paykit/alipay/app_private_key.pem is in no volume it mounts"},
		"a file not among the items": {pod("Deployment", "a", "api", "{}",
			"["+dsnEnv+", "+alipayEnv+", {name: ALIPAY_PUBLIC_KEY_FILE, value: /etc/paykit/alipay/alipay_public_key.pem}]", "["+alipayMount+"]", "["+alipayVolume+"]"),
			"the volume of Secret paykit has no item at alipay_public_key.pem"},
		"a Secret volume mounted by none": {pod("Job", "m", "migrate", hookJob, "["+dsnEnv+"]", "[]", "["+alipayVolume+"]"),
			"volume alipay of Secret paykit is mounted by no container"},
		"every key of a Secret": {strings.Replace(pod("Job", "m", "migrate", hookJob, "["+dsnEnv+"]", "[]", "[]"), "          env:", "          envFrom: [{secretRef: {name: paykit}}]\n          env:", 1),
			"takes every key of Secret paykit"},
		"two of the three certificates": {pod("Deployment", "a", "api", "{}",
			"["+dsnEnv+", "+alipayEnv+", {name: ALIPAY_APP_CERT_FILE, value: /etc/paykit/alipay/a.crt}, {name: ALIPAY_ROOT_CERT_FILE, value: /etc/paykit/alipay/r.crt}]",
			"["+alipayMount+"]", "[{name: alipay, secret: {secretName: paykit}}]"),
			"sets 2 of ALIPAY_APP_CERT_FILE, ALIPAY_PUBLIC_CERT_FILE, ALIPAY_ROOT_CERT_FILE"},
	} {
		got := errorsOf(t, tc.doc, podSecrets)
		switch {
		case tc.wantErr == "" && got != "":
			t.Errorf("%s: %s", name, got)
		case !strings.Contains(got, tc.wantErr):
			t.Errorf("%s: got %q, want an error containing %q", name, got, tc.wantErr)
		}
	}
}

func off() (np struct {
	Enabled *bool `json:"enabled"`
}) {
	f := false
	np.Enabled = &f
	return np
}

// The chart's Secrets: the Deployments read the release's, which Helm deletes with the
// release or when the values move to an existing Secret; a hook Job reads a hook Secret
// written before it for its events and deleted once the hooks have run.
func TestChartSecretsAreDeletedWithTheirUse(t *testing.T) {
	secret := func(name, annotations string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\n  annotations: " + annotations + "\nstringData: {mysql-dsn: dsn}\n"
	}
	const hookSecret = "{helm.sh/hook: 'pre-install,pre-upgrade', helm.sh/hook-weight: '-10', helm.sh/hook-delete-policy: 'before-hook-creation,hook-succeeded'}"
	dsn := func(secret string) string {
		return "[" + strings.Replace(dsnEnv, "name: paykit,", "name: "+secret+",", 1) + "]"
	}
	api := func(secret string) string {
		return pod("Deployment", "paykit-api", "api", "{}", dsn(secret)[:len(dsn(secret))-1]+", "+alipayEnv+"]", "["+alipayMount+"]",
			"["+strings.Replace(alipayVolume, "secretName: paykit", "secretName: "+secret, 1)+"]")
	}
	migrate := func(secret string) string {
		return pod("Job", "paykit-migrate", "migrate", hookJob, dsn(secret), "[]", "[]")
	}
	for name, tc := range map[string]struct {
		docs    []string
		wantErr string
	}{
		"as the chart renders it": {[]string{secret("paykit-secrets", "{}"), secret("paykit-migrate", hookSecret), api("paykit-secrets"), migrate("paykit-migrate")}, ""},
		"existing Secrets":        {[]string{api("mine"), migrate("mine")}, ""},
		"one hook Secret for all": {[]string{
			secret("paykit", "{helm.sh/hook: 'pre-install,pre-upgrade,pre-rollback', helm.sh/hook-weight: '-10', helm.sh/hook-delete-policy: before-hook-creation}"),
			api("paykit"), migrate("paykit"),
		}, "Secret paykit: a hook whose helm.sh/hook-delete-policy lacks hook-succeeded"},
		"the API reads a hook Secret": {[]string{secret("paykit-migrate", hookSecret), api("paykit-migrate"), migrate("paykit-migrate")},
			"Deployment paykit-api reads Secret paykit-migrate, a hook"},
		"the migration reads the release's Secret": {[]string{secret("paykit-secrets", "{}"), api("paykit-secrets"), migrate("paykit-secrets")},
			"Job paykit-migrate, a hook, reads Secret paykit-secrets, the release's"},
		"the hook Secret after the Job": {[]string{
			secret("paykit-migrate", strings.Replace(hookSecret, "'-10'", "'5'", 1)), secret("paykit-secrets", "{}"), api("paykit-secrets"), migrate("paykit-migrate"),
		}, "has helm.sh/hook-weight \"5\", want less than the Job's \"0\""},
		"the hook Secret not written on upgrade": {[]string{
			secret("paykit-migrate", strings.Replace(hookSecret, "'pre-install,pre-upgrade'", "pre-install", 1)), secret("paykit-secrets", "{}"), api("paykit-secrets"), migrate("paykit-migrate"),
		}, "runs on pre-upgrade, and Secret paykit-migrate, which it reads, is not written then"},
	} {
		got := errorsOf(t, strings.Join(tc.docs, "---\n"), rendered.hookSecretErrors)
		switch {
		case tc.wantErr == "" && got != "":
			t.Errorf("%s: %s", name, got)
		case !strings.Contains(got, tc.wantErr):
			t.Errorf("%s: got %q, want an error containing %q", name, got, tc.wantErr)
		}
	}
}

// The render does what its values ask: a NetworkPolicy unless turned off, the
// migration's own DSN for the migration alone, certificate mode's files where asked.
func TestRenderDoesWhatTheValuesAsk(t *testing.T) {
	const np = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: paykit}\nspec:\n" +
		"  podSelector: {matchExpressions: [{key: app.kubernetes.io/component, operator: In, values: [api, worker]}]}\n" +
		"  policyTypes: [Ingress]\n  ingress:\n    - ports: [{port: http}]\n"
	secrets := "apiVersion: v1\nkind: Secret\nmetadata: {name: paykit}\nstringData: {mysql-dsn: main, migrate: ddl}\n"
	migrate := func(key string) string {
		return pod("Job", "paykit-migrate", "migrate", "{}", "["+strings.Replace(dsnEnv, "key: mysql-dsn", "key: "+key, 1)+"]", "[]", "[]")
	}
	certEnv := "{name: ALIPAY_APP_CERT_FILE, value: /etc/paykit/alipay-certs/app.crt}, {name: ALIPAY_PUBLIC_CERT_FILE, value: /etc/paykit/alipay-certs/alipay.crt}, " +
		"{name: ALIPAY_ROOT_CERT_FILE, value: /etc/paykit/alipay-certs/root.crt}"
	api := pod("Deployment", "paykit-api", "api", "{}", "["+dsnEnv+", "+alipayEnv+"]", "["+alipayMount+"]", "["+alipayVolume+"]")
	certAPI := func(secretName string) string {
		return pod("Deployment", "paykit-api", "api", "{}", "["+dsnEnv+", "+alipayEnv+", "+certEnv+"]",
			"["+alipayMount+", {name: certs, mountPath: /etc/paykit/alipay-certs}]", "["+alipayVolume+", {name: certs, secret: {secretName: "+secretName+"}}]")
	}
	var migrateDSN, certs, existingMigrate intent
	migrateDSN.MySQL.Migrate.DSN = "ddl"
	existingMigrate.MySQL.Migrate.ExistingSecret = "paykit"
	existingMigrate.MySQL.Migrate.Key = "migrate"
	certs.Alipay.Certificates.ExistingSecret = "alipay-certs"
	for name, tc := range map[string]struct {
		docs    []string
		in      intent
		wantErr string
	}{
		"the default with its NetworkPolicy": {[]string{np, secrets, api, migrate("mysql-dsn")}, intent{}, ""},
		"the default without a NetworkPolicy": {[]string{secrets, api, migrate("mysql-dsn")}, intent{},
			"Deployment paykit-api: no NetworkPolicy isolates its pods' ingress"},
		"a NetworkPolicy turned off":           {[]string{secrets, api, migrate("mysql-dsn")}, intent{NetworkPolicy: off()}, ""},
		"the migration's own DSN":              {[]string{np, secrets, api, migrate("migrate")}, migrateDSN, ""},
		"the migration's own DSN, not used":    {[]string{np, secrets, api, migrate("mysql-dsn")}, migrateDSN, "is not mysql.migrate.dsn"},
		"the migration's Secret":               {[]string{np, secrets, api, migrate("migrate")}, existingMigrate, ""},
		"the migration's Secret, not used":     {[]string{np, secrets, api, migrate("mysql-dsn")}, existingMigrate, "want mysql.migrate's paykit key migrate"},
		"another DSN, never asked for":         {[]string{np, secrets, api, migrate("migrate")}, intent{}, "is not the API's"},
		"certificate mode":                     {[]string{np, secrets, certAPI("alipay-certs")}, certs, ""},
		"certificate mode, not rendered":       {[]string{np, secrets, api}, certs, "ALIPAY_APP_CERT_FILE is not set"},
		"certificate mode from another Secret": {[]string{np, secrets, certAPI("paykit")}, certs, "is not from Secret alipay-certs"},
		"certificate mode, never asked for":    {[]string{np, secrets, certAPI("alipay-certs")}, intent{}, "sets ALIPAY_APP_CERT_FILE, and the values ask for no certificate mode"},
	} {
		r, errs := check([]byte(strings.Join(tc.docs, "---\n")), nil, tc.in)
		for _, e := range errs {
			if strings.Contains(e.Error(), "document") {
				t.Fatalf("%s: %v", name, e)
			}
		}
		var got []string
		for _, e := range r.intentErrors(tc.in) {
			got = append(got, e.Error())
		}
		joined := strings.Join(got, "; ")
		switch {
		case tc.wantErr == "" && joined != "":
			t.Errorf("%s: %s", name, joined)
		case !strings.Contains(joined, tc.wantErr):
			t.Errorf("%s: got %q, want an error containing %q", name, joined, tc.wantErr)
		}
	}
}
