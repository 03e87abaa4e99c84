package validate

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestServiceTokensPerPair: every client→server pair has a token of its
// own, which only the client's pods hold; a server holds the SHA-256 of
// each of its callers' tokens (Secret switchboard-service-token-digests)
// and none of their tokens, so a server pod that is taken over gives its
// attacker no token another server accepts.
func TestServiceTokensPerPair(t *testing.T) {
	renders := map[string]*Render{}
	for _, overlay := range overlayDirs(t) {
		renders[overlay] = decodeClean(t, overlay, build(t, overlay))
	}
	for name, r := range renders {
		for _, comp := range []string{"aggregator", "indexer"} {
			d := r.deployment("switchboard-" + comp)
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != ServiceTokensSecret {
					continue
				}
				// A server holds a token only as a client: its own.
				if key := e.ValueFrom.SecretKeyRef.Key; !strings.HasPrefix(key, comp+"-") {
					t.Errorf("%s: the %s pod holds token %s, which is not one of its own", name, comp, key)
				}
			}
		}
	}
}

// TestCheckCatchesSharedTokens breaks the per-pair tokens on purpose and
// requires Check to notice: a server pod given a token it does not
// present, a server verifying a caller by its token rather than its
// digest, two pairs presenting one token, and one credential with the same
// token on both servers.
func TestCheckCatchesSharedTokens(t *testing.T) {
	dev := build(t, "development")
	container := func(r *Render, name string) *corev1.Container {
		return &r.deployment(name).Spec.Template.Spec.Containers[0]
	}
	addSecretEnv := func(c *corev1.Container, env, secret, key string) {
		c.Env = append(c.Env, corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}})
	}
	setEnvKey := func(t *testing.T, c *corev1.Container, env, key string) {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == env })
		if i < 0 {
			t.Fatalf("container %s has no env %s: update this case", c.Name, env)
		}
		c.Env[i].ValueFrom.SecretKeyRef.Key = key
	}
	editConfig := func(t *testing.T, r *Render, from, to string) {
		for _, cm := range r.ConfigMaps {
			if v, ok := cm.Data["switchboard.yaml"]; ok {
				if !strings.Contains(v, from) {
					t.Fatalf("config lacks %q: update this case", from)
				}
				cm.Data["switchboard.yaml"] = strings.Replace(v, from, to, 1)
			}
		}
	}
	cases := []struct {
		name   string
		mutate func(t *testing.T, r *Render)
		want   string
	}{
		{"indexer pod given a caller's token", func(t *testing.T, r *Render) {
			addSecretEnv(container(r, "switchboard-indexer"), "SWITCHBOARD_GATEWAY_INDEXER_TOKEN", ServiceTokensSecret, "gateway-indexer")
		}, "env SWITCHBOARD_GATEWAY_INDEXER_TOKEN holds token gateway-indexer of Secret switchboard-service-tokens, which the indexer does not present"},
		{"indexer pod given the gateway's token to the aggregator", func(t *testing.T, r *Render) {
			addSecretEnv(container(r, "switchboard-indexer"), "SWITCHBOARD_GATEWAY_AGGREGATOR_TOKEN", ServiceTokensSecret, "gateway-aggregator")
		}, "env SWITCHBOARD_GATEWAY_AGGREGATOR_TOKEN holds token gateway-aggregator of Secret switchboard-service-tokens, which the indexer does not present"},
		{"aggregator pod given the console's token", func(t *testing.T, r *Render) {
			addSecretEnv(container(r, "switchboard-aggregator"), "SWITCHBOARD_CONSOLE_AGGREGATOR_TOKEN", ServiceTokensSecret, "console-aggregator")
		}, "env SWITCHBOARD_CONSOLE_AGGREGATOR_TOKEN holds token console-aggregator of Secret switchboard-service-tokens, which the aggregator does not present"},
		{"aggregator verifying a caller by its token", func(t *testing.T, r *Render) {
			editConfig(t, r, "tokenSHA256: ${SWITCHBOARD_GATEWAY_TOKEN_SHA256:-}", "token: ${SWITCHBOARD_GATEWAY_AGGREGATOR_TOKEN:-}")
			addSecretEnv(container(r, "switchboard-aggregator"), "SWITCHBOARD_GATEWAY_AGGREGATOR_TOKEN", ServiceTokensSecret, "gateway-aggregator")
		}, "serviceAuth.credentials[0] (gateway).token: the aggregator verifies this caller by its token, so its pods hold the secret: give its SHA-256 as tokenSHA256"},
		{"gateway presenting one token to both servers (Secret key)", func(t *testing.T, r *Render) {
			setEnvKey(t, container(r, "switchboard-gateway"), "SWITCHBOARD_GATEWAY_INDEXER_TOKEN", "gateway-aggregator")
		}, "present the same token: give each client→server pair a token of its own"},
		{"gateway presenting one token to both servers (configuration)", func(t *testing.T, r *Render) {
			editConfig(t, r, "token: ${SWITCHBOARD_GATEWAY_INDEXER_TOKEN:-}", "token: ${SWITCHBOARD_GATEWAY_AGGREGATOR_TOKEN:-}")
		}, "gateway.aggregator.token (Deployment switchboard-gateway) and gateway.indexer.token (Deployment switchboard-gateway) present the same token"},
		{"console presenting the gateway's token", func(t *testing.T, r *Render) {
			editConfig(t, r, "aggregatorToken: ${SWITCHBOARD_CONSOLE_AGGREGATOR_TOKEN:-}", "aggregatorToken: ${SWITCHBOARD_GATEWAY_AGGREGATOR_TOKEN:-}")
		}, "present the same token"},
		{"aggregator presenting one token to its peers and the indexer", func(t *testing.T, r *Render) {
			setEnvKey(t, container(r, "switchboard-aggregator"), "SWITCHBOARD_AGGREGATOR_INDEXER_TOKEN", "aggregator-aggregator")
		}, "present the same token"},
		{"indexer and gateway presenting one token to the aggregator", func(t *testing.T, r *Render) {
			setEnvKey(t, container(r, "switchboard-indexer"), "SWITCHBOARD_INDEXER_AGGREGATOR_TOKEN", "gateway-aggregator")
		}, "present the same token"},
		{"one credential with the same digest on both servers", func(t *testing.T, r *Render) {
			setEnvKey(t, container(r, "switchboard-indexer"), "SWITCHBOARD_GATEWAY_TOKEN_SHA256", "gateway-aggregator")
		}, "credential gateway has the same token on the aggregator and the indexer"},
		{"digest of another pair", func(t *testing.T, r *Render) {
			setEnvKey(t, container(r, "switchboard-aggregator"), "SWITCHBOARD_GATEWAY_TOKEN_SHA256", "gateway-indexer")
		}, "gateway.aggregator.token is not a principal-asserting credential of the aggregator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeClean(t, "development", dev)
			if errs := Check(r); len(errs) != 0 {
				t.Fatalf("unmodified render has problems: %v", errs)
			}
			tc.mutate(t, r)
			expectProblem(t, Check(r), tc.want)
		})
	}
}
