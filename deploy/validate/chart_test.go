package validate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../helm/switchboard"

// helmBinary is the pinned helm (run.sh sets HELM).
func helmBinary() string {
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	return "helm"
}

// chartRender is one way the chart is rendered: a values file of the
// chart (none: its defaults), the namespace it is installed into, and the
// kustomize overlay it must equal ("" for none).
type chartRender struct {
	name, values, namespace, overlay string
}

var chartRenders = []chartRender{
	{"defaults", "", "switchboard", ""},
	{"production", "ci/production-values.yaml", "switchboard", "production"},
	{"development", "ci/development-values.yaml", "switchboard-dev", "development"},
}

// chartCase returns the render called name.
func chartCase(t *testing.T, name string) chartRender {
	t.Helper()
	i := slices.IndexFunc(chartRenders, func(c chartRender) bool { return c.name == name })
	if i < 0 {
		t.Fatalf("no chart render %s", name)
	}
	return chartRenders[i]
}

// renderChart runs helm template for c, with further helm flags (--set).
func renderChart(t *testing.T, c chartRender, flags ...string) []byte {
	t.Helper()
	args := []string{"template", "switchboard", chartDir, "--namespace", c.namespace}
	if c.values != "" {
		args = append(args, "--values", filepath.Join(chartDir, c.values))
	}
	args = append(args, flags...)
	cmd := exec.Command(helmBinary(), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func decodeChart(t *testing.T, c chartRender, flags ...string) *Render {
	t.Helper()
	return decodeClean(t, "chart "+c.name, renderChart(t, c, flags...))
}

// TestChartValuesFilesListed: every values file of the chart's ci/
// directory is rendered (and so validated) by the tests below.
func TestChartValuesFilesListed(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files in %s/ci: %v", chartDir, err)
	}
	for _, f := range files {
		rel := filepath.Join("ci", filepath.Base(f))
		if !slices.ContainsFunc(chartRenders, func(c chartRender) bool { return c.values == rel }) {
			t.Errorf("%s is not in chartRenders, so nothing validates it", rel)
		}
	}
}

// TestChart renders the chart with its defaults and each values file and
// requires the same as of every overlay: strict decoding, every
// cross-check, every service complete.
func TestChart(t *testing.T) {
	for _, c := range chartRenders {
		t.Run(c.name, func(t *testing.T) {
			r := decodeChart(t, c)
			checkComplete(t, r)
			for _, d := range r.Deployments {
				if d.Namespace != c.namespace {
					t.Errorf("Deployment %s is in namespace %q, want the release's %q", d.Name, d.Namespace, c.namespace)
				}
			}
		})
	}
	t.Run("production shape", func(t *testing.T) {
		checkProductionShape(t, decodeChart(t, chartCase(t, "production")))
	})
}

// TestChartToggles renders the optional parts one at a time and fixed
// replica counts, combinations no overlay renders, and requires every
// cross-check to pass and the part to be there or gone.
func TestChartToggles(t *testing.T) {
	defaults := chartCase(t, "defaults")
	cases := []struct {
		name  string
		flags []string
		check func(t *testing.T, r *Render)
	}{
		{"cloudnativepg only", []string{"--set", "cloudnativepg.enabled=true"}, func(t *testing.T, r *Render) {
			c := r.deployment("switchboard-indexer").Spec.Template.Spec.Containers[0]
			if len(r.Clusters) != 1 || envLookupValue(c, "SWITCHBOARD_DATABASE_URL") != "secret:switchboard-postgres-app/uri" {
				t.Errorf("want the Cluster and the indexer on its Secret, got %d Clusters and %q", len(r.Clusters), envLookupValue(c, "SWITCHBOARD_DATABASE_URL"))
			}
		}},
		{"mtls only", []string{"--set", "mtls.enabled=true"}, func(t *testing.T, r *Render) {
			if len(r.Certificates) != 5 || len(r.Issuers) != 2 {
				t.Errorf("want 5 Certificates and 2 Issuers, got %d and %d", len(r.Certificates), len(r.Issuers))
			}
			if len(r.Clusters) != 0 || len(r.Ingresses) != 0 {
				t.Error("mtls.enabled rendered a Cluster or an Ingress")
			}
		}},
		{"ingress only", []string{"--set", "ingress.enabled=true", "--set", "ingress.host=mcp.example.org", "--set", "ingress.clusterIssuer="}, func(t *testing.T, r *Render) {
			if len(r.Ingresses) != 1 || r.Ingresses[0].Spec.Rules[0].Host != "mcp.example.org" {
				t.Fatalf("want one Ingress for mcp.example.org, got %d", len(r.Ingresses))
			}
			if _, ok := r.Ingresses[0].Annotations["cert-manager.io/cluster-issuer"]; ok {
				t.Error("an empty ingress.clusterIssuer still sets the annotation")
			}
		}},
		{"a Cedar policy", []string{"--set-string", "files.policy\\.cedar=  // indented first line\npermit (principal\\, action\\, resource);",
			"--set", "config.aggregator.authz.policyFile=/etc/switchboard/policy.cedar"}, func(t *testing.T, r *Render) {
			if cm := r.configMap("switchboard-config"); cm == nil || !strings.Contains(cm.Data["policy.cedar"], "permit") {
				t.Error("the policy is not in the configuration's ConfigMap")
			}
			plain := decodeChart(t, defaults)
			if got, was := r.deployment("switchboard-aggregator").Spec.Template.Annotations["checksum/config"], plain.deployment("switchboard-aggregator").Spec.Template.Annotations["checksum/config"]; got == was {
				t.Error("a policy file leaves the checksum as it was: a changed policy would not roll the pods")
			}
			// The ConfigMap is named by its content, so a changed file is a
			// new ConfigMap that only the rollout's pods mount: an
			// in-place update once reached every running pod at once,
			// past the rollout a bad file should stop.
			was, now := plain.configMap("switchboard-config").Name, r.configMap("switchboard-config").Name
			if was == now || !strings.HasPrefix(now, "switchboard-config-") {
				t.Errorf("the configuration's ConfigMap is %s with the policy and %s without: not named by its content", now, was)
			}
			// An upgrade keeps the previous one, which pods of the older
			// ReplicaSet (evicted, scaled) still mount.
			if r.configMap("switchboard-config").Annotations["helm.sh/resource-policy"] != "keep" {
				t.Error("an upgrade would delete the ConfigMap the previous ReplicaSet's pods mount")
			}
			for _, d := range []string{"switchboard-gateway", "switchboard-aggregator", "switchboard-indexer"} {
				if !slices.ContainsFunc(r.deployment(d).Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.ConfigMap != nil && v.ConfigMap.Name == now }) {
					t.Errorf("%s does not mount %s", d, now)
				}
			}
		}},
		{"image tag all digits from --set", []string{"--set", "image.tag=20240101"}, func(t *testing.T, r *Render) {
			if img := r.deployment("switchboard-gateway").Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/switchboard-mcp/switchboard-gateway:20240101" {
				t.Errorf("image %s, want the tag as given", img)
			}
		}},
		{"fixed replicas", []string{"--set", "gateway.autoscaling.enabled=false", "--set", "aggregator.autoscaling.enabled=false", "--set", "aggregator.replicas=3"}, func(t *testing.T, r *Render) {
			if hasNamed(r.HPAs, "switchboard-gateway") || hasNamed(r.HPAs, "switchboard-aggregator") || !hasNamed(r.HPAs, "switchboard-indexer") {
				t.Errorf("want an HPA for the indexer only, got %d", len(r.HPAs))
			}
			if n := r.deployment("switchboard-aggregator").Spec.Replicas; n == nil || *n != 3 {
				t.Errorf("aggregator replicas %v, want 3", n)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeChart(t, defaults, tc.flags...)
			for _, err := range Check(r) {
				t.Error(err)
			}
			tc.check(t, r)
		})
	}
}

// TestChartMatchesOverlays: the chart with a ci/ values file renders the
// objects of the matching kustomize overlay, field for field (Compare).
func TestChartMatchesOverlays(t *testing.T) {
	for _, c := range chartRenders {
		if c.overlay == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			want := decodeClean(t, "kustomize "+c.overlay, build(t, c.overlay))
			got := decodeChart(t, c)
			for _, err := range Compare(want, got) {
				t.Error(err)
			}
		})
	}
}

// TestCompareCatchesMistakes breaks the chart's production render in each
// way Compare must notice and requires the matching complaint.
func TestCompareCatchesMistakes(t *testing.T) {
	prod := chartCase(t, "production")
	want := decodeClean(t, "kustomize production", build(t, "production"))
	chart := renderChart(t, prod)
	container := func(r *Render, name string) *corev1.Container {
		return &r.deployment(name).Spec.Template.Spec.Containers[0]
	}
	editData := func(r *Render, cm, key, from, to string) {
		c := r.configMap(cm)
		if c == nil || !strings.Contains(c.Data[key], from) {
			t.Fatalf("ConfigMap %s key %s lacks %q: update this case", cm, key, from)
		}
		c.Data[key] = strings.Replace(c.Data[key], from, to, 1)
	}
	cases := []struct {
		name   string
		mutate func(r *Render)
		want   string
	}{
		{"container port", func(r *Render) {
			container(r, "switchboard-gateway").Ports[0].ContainerPort = 8081
		}, "Deployment switchboard-gateway .spec.template.spec.containers[0].ports[0].containerPort: kustomize production has 8080, chart production has 8081"},
		{"probe timing", func(r *Render) {
			container(r, "switchboard-aggregator").ReadinessProbe.PeriodSeconds = 7
		}, "Deployment switchboard-aggregator .spec.template.spec.containers[0].readinessProbe.periodSeconds"},
		{"probe handler", func(r *Render) {
			pr := container(r, "switchboard-aggregator").StartupProbe
			pr.HTTPGet = nil
			pr.GRPC = &corev1.GRPCAction{Port: 50051}
		}, "Deployment switchboard-aggregator .spec.template.spec.containers[0].startupProbe.grpc: kustomize production has (absent)"},
		{"environment", func(r *Render) {
			c := container(r, "switchboard-gateway")
			for i := range c.Env {
				if c.Env[i].Name == "SWITCHBOARD_SESSION_KEY" {
					c.Env[i].ValueFrom.SecretKeyRef.Key = "session"
				}
			}
		}, `.valueFrom.secretKeyRef.key: kustomize production has "session-key", chart production has "session"`},
		{"volume", func(r *Render) {
			spec := &r.deployment("switchboard-indexer").Spec.Template.Spec
			spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "postgres-ca" })
		}, "Deployment switchboard-indexer .spec.template.spec.volumes"},
		{"replicas", func(r *Render) {
			n := int32(3)
			r.deployment("switchboard-otel-collector").Spec.Replicas = &n
		}, "Deployment switchboard-otel-collector .spec.replicas: kustomize production has 2, chart production has 3"},
		{"HPA bound", func(r *Render) {
			for _, h := range r.HPAs {
				if h.Name == "switchboard-gateway" {
					h.Spec.MaxReplicas = 11
				}
			}
		}, "HorizontalPodAutoscaler switchboard-gateway .spec.maxReplicas: kustomize production has 10, chart production has 11"},
		{"PDB", func(r *Render) {
			for _, b := range r.PDBs {
				if b.Name == "switchboard-indexer" {
					b.Spec.MaxUnavailable.IntVal = 2
				}
			}
		}, "PodDisruptionBudget switchboard-indexer .spec.maxUnavailable: kustomize production has 1, chart production has 2"},
		{"NetworkPolicy rule", func(r *Render) {
			dropPolicyPeer(t, r, "switchboard-indexer", "aggregator")
		}, "NetworkPolicy switchboard-indexer .spec.ingress[0].from"},
		{"switchboard.yaml content", func(r *Render) {
			editData(r, "switchboard-config", "switchboard.yaml", "sampleRatio: 0.1", "sampleRatio: 0.5")
		}, "ConfigMap switchboard-config .data.switchboard.yaml.telemetry.sampleRatio: kustomize production has 0.1, chart production has 0.5"},
		{"collector config content", func(r *Render) {
			editData(r, "switchboard-otel-collector", "config.yaml", "tracing-backend.observability.svc:4317", "tempo:4317")
		}, `ConfigMap switchboard-otel-collector .data.config.yaml.exporters.otlp/backend.endpoint`},
		{"headless Service missing", func(r *Render) {
			r.Services = slices.DeleteFunc(r.Services, func(s *corev1.Service) bool { return s.Name == "switchboard-indexer-headless" })
		}, "Service switchboard-indexer-headless is in kustomize production but not in chart production"},
		{"extra object", func(r *Render) {
			r.ServiceAccounts = append(r.ServiceAccounts, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "switchboard-extra", Namespace: "switchboard"}})
		}, "ServiceAccount switchboard-extra is in chart production but not in kustomize production"},
		{"Service port", func(r *Render) {
			r.service("switchboard-aggregator-headless").Spec.Ports[0].Port = 50053
		}, "Service switchboard-aggregator-headless .spec.ports[0].port"},
		{"Ingress annotation", func(r *Render) {
			delete(r.Ingresses[0].Annotations, "nginx.ingress.kubernetes.io/proxy-buffering")
		}, `Ingress switchboard-gateway .metadata.annotations.nginx.ingress.kubernetes.io/proxy-buffering: kustomize production has "off", chart production has (absent)`},
		{"Certificate name", func(r *Render) {
			for _, c := range r.Certificates {
				if c.Metadata.Name == "switchboard-indexer" {
					c.Spec.DNSNames = c.Spec.DNSNames[:1]
				}
			}
		}, "Certificate switchboard-indexer .spec.dnsNames"},
		{"CloudNativePG instances", func(r *Render) {
			r.Clusters[0].Spec.Instances = 2
		}, "Cluster switchboard-postgres .spec.instances: kustomize production has 3, chart production has 2"},
		{"namespace", func(r *Render) {
			r.PDBs[0].Namespace = "default"
		}, `.metadata.namespace: kustomize production has "switchboard", chart production has "default"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeClean(t, "chart production", chart)
			if errs := Compare(want, got); len(errs) != 0 {
				t.Fatalf("unmodified renders differ: %v", errs)
			}
			tc.mutate(got)
			expectProblem(t, Compare(want, got), tc.want)
		})
	}
}

// TestChartCheckCatchesMistakes renders the chart with values that break
// the deployment and requires the cross-checks to notice, as they do for
// a broken overlay.
func TestChartCheckCatchesMistakes(t *testing.T) {
	cases := []struct {
		name, render string
		flags        []string
		want         string
	}{
		{"listen port differs from container port", "defaults", []string{"--set", "config.gateway.listen=0.0.0.0:8081"},
			`gateway.listen is "0.0.0.0:8081" but container port http is 8080`},
		{"database Secret nobody creates", "defaults", []string{"--set", "secrets.database=switchboard-db"},
			"env SWITCHBOARD_DATABASE_URL reads Secret switchboard-db"},
		{"extra env from an unknown Secret", "defaults", []string{"--set-json", `gateway.extraEnv=[{"name":"X","valueFrom":{"secretKeyRef":{"name":"nope","key":"k"}}}]`},
			"env X reads Secret nope"},
		{"peers dropped", "defaults", []string{"--set", "config.aggregator.peers=null"},
			"aggregator.peers is unset but up to 6 replicas run"},
		{"untagged image", "defaults", []string{"--set", "image.tag=latest"},
			"must carry a release tag"},
		{"telemetry to a missing Service", "defaults", []string{"--set", "config.telemetry.otlpEndpoint=otel:4317"},
			`telemetry.otlpEndpoint "otel:4317": no Service "otel"`},
		{"pinning to the ClusterIP Service", "defaults", []string{"--set", "config.aggregator.pinning.indexer.address=dns:///switchboard-indexer:50052"},
			"Service switchboard-indexer is not headless"},
		{"no memory limit", "defaults", []string{"--set", "indexer.resources.limits=null"},
			"container indexer: no memory limit"},
		{"collector exporter undefined", "defaults", []string{"--set-json", `otelCollector.config.service.pipelines.traces.exporters=["otlp"]`},
			"uses undefined exporter otlp"},
		{"TLS file not mounted", "production", []string{"--set", "config.serviceAuth.tls.certFile=/etc/other/tls.crt"},
			"serviceAuth.tls.certFile /etc/other/tls.crt is not a file of a mounted volume"},
		{"policy file not in the ConfigMap", "defaults", []string{"--set", "config.aggregator.authz.policyFile=/etc/switchboard/policy.cedar"},
			" has no key policy.cedar"},
		{"policy file in no volume", "defaults", []string{"--set", "config.aggregator.authz.policyFile=/srv/policy.cedar"},
			"aggregator.authz.policyFile /srv/policy.cedar is not a file of a mounted volume"},
		{"session key missing with several gateways", "development", []string{"--set", "config.gateway.sessions.key="},
			"gateway.sessions.key"},
		{"indexer given the gateway's token to the aggregator", "production", []string{"--set-json",
			`indexer.extraEnv=[{"name":"X","valueFrom":{"secretKeyRef":{"name":"switchboard-service-tokens","key":"gateway-aggregator"}}}]`},
			"env X holds token gateway-aggregator of Secret switchboard-service-tokens, which the indexer does not present"},
		{"gateway presenting one token to both servers", "defaults", []string{"--set", "config.gateway.indexer.token=${SWITCHBOARD_GATEWAY_AGGREGATOR_TOKEN:-}"},
			"present the same token: give each client→server pair a token of its own"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeChart(t, chartCase(t, tc.render), tc.flags...)
			expectProblem(t, Check(r), tc.want)
		})
	}
}

// TestChartSchemaRejectsMistakes: values.schema.json makes helm refuse a
// misspelt or mistyped value instead of ignoring it.
func TestChartSchemaRejectsMistakes(t *testing.T) {
	cases := []struct {
		name  string
		flags []string
		want  string
	}{
		{"misspelt key", []string{"--set", "cloudnativepg.enable=true"}, "additional properties 'enable' not allowed"},
		{"wrong type", []string{"--set-json", `gateway.autoscaling.maxReplicas="ten"`}, "/gateway/autoscaling/maxReplicas"},
		{"below the minimum", []string{"--set", "indexer.autoscaling.minReplicas=0"}, "/indexer/autoscaling/minReplicas"},
		// A number in a values file (or --set-json) reaches the chart as a
		// float: 1.10 is 1.1, and 20240101 would be 2.0240101e+07.
		{"image tag a fraction", []string{"--set-json", "image.tag=1.10"}, "/image/tag"},
		{"image tag a number of a values file", []string{"--set-json", "gateway.image.tag=20240101"}, "quote it"},
		// The API server would refuse the HorizontalPodAutoscaler at install.
		{"autoscaling minimum above its maximum", []string{"--set", "gateway.autoscaling.minReplicas=12"}, "minReplicas 12 is above maxReplicas"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"template", "switchboard", chartDir}, tc.flags...)
			out, err := exec.Command(helmBinary(), args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("helm %v: want a failure mentioning %q, got %v:\n%s", tc.flags, tc.want, err, out)
			}
		})
	}
}

// TestChartValuesDocumented: every value of values.yaml has a row in the
// chart's README.md.
func TestChartValuesDocumented(t *testing.T) {
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	missing, err := undocumentedValues(values, string(readme))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range missing {
		t.Errorf("value %s has no row in %s/README.md", k, chartDir)
	}
	// The check can fail: a README without the row of a value.
	row := "| `ingress.host` |"
	if !strings.Contains(string(readme), row) {
		t.Fatalf("README.md has no row %q: update this case", row)
	}
	missing, err = undocumentedValues(values, strings.Replace(string(readme), row, "| host |", 1))
	if err != nil || !slices.Contains(missing, "ingress.host") {
		t.Errorf("a README without the row of ingress.host passes: %v %v", missing, err)
	}
}

// opaqueValues are documented as a whole: their content is a Kubernetes
// or a configuration structure, not a setting of the chart.
var opaqueValues = []string{"config", "resources", "annotations", "podAnnotations", "nodeSelector", "tolerations", "affinity", "extraEnv"}

// perService are the components whose values have the same keys; the
// README documents such a key once as <service>.key.
var perService = []string{"gateway", "aggregator", "indexer"}

// undocumentedValues returns every value of a values file that readme
// does not name in backquotes, either itself or as <service>.key.
func undocumentedValues(values []byte, readme string) ([]string, error) {
	var root map[string]any
	if err := yaml.Unmarshal(values, &root); err != nil {
		return nil, err
	}
	var leaves []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for _, k := range sortedKeys(m) {
			path := prefix + k
			if sub, ok := m[k].(map[string]any); ok && len(sub) > 0 && !slices.Contains(opaqueValues, k) {
				walk(path+".", sub)
				continue
			}
			leaves = append(leaves, path)
		}
	}
	walk("", root)
	var missing []string
	for _, path := range leaves {
		if strings.Contains(readme, "`"+path+"`") {
			continue
		}
		first, rest, _ := strings.Cut(path, ".")
		if slices.Contains(perService, first) && strings.Contains(readme, fmt.Sprintf("`<service>.%s`", rest)) {
			continue
		}
		missing = append(missing, path)
	}
	return missing, nil
}
