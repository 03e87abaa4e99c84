package validate

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	repoRoot = "../.."
	k8sDir   = "../k8s"
)

// kustomizeBinary is the pinned kustomize (run.sh sets KUSTOMIZE).
func kustomizeBinary() string {
	if k := os.Getenv("KUSTOMIZE"); k != "" {
		return k
	}
	return "kustomize"
}

func overlayDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(k8sDir, "overlays", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dirs {
		names = append(names, filepath.Base(d))
	}
	for _, want := range []string{"development", "production"} {
		if !slices.Contains(names, want) {
			t.Fatalf("overlay %s missing (found %v)", want, names)
		}
	}
	return names
}

// build renders an overlay with kustomize.
func build(t *testing.T, overlay string) []byte {
	t.Helper()
	cmd := exec.Command(kustomizeBinary(), "build", filepath.Join(k8sDir, "overlays", overlay))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", overlay, err, stderr.String())
	}
	return out
}

func decodeClean(t *testing.T, name string, stream []byte) *Render {
	t.Helper()
	r, errs := Decode(name, stream)
	for _, err := range errs {
		t.Errorf("%s: %v", name, err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return r
}

// TestOverlays renders every overlay and requires it to decode strictly and
// pass every cross-check.
func TestOverlays(t *testing.T) {
	for _, overlay := range overlayDirs(t) {
		t.Run(overlay, func(t *testing.T) {
			checkComplete(t, decodeClean(t, overlay, build(t, overlay)))
		})
	}
}

// checkComplete requires a render to pass every cross-check and to hold
// every Switchboard service complete, in a namespace, with images the
// Dockerfile builds.
func checkComplete(t *testing.T, r *Render) {
	t.Helper()
	for _, err := range Check(r) {
		t.Error(err)
	}
	for _, comp := range switchboardServices {
		name := "switchboard-" + comp
		if r.deployment(name) == nil || r.service(name) == nil {
			t.Errorf("%s: Deployment and Service missing", name)
		}
		if !hasNamed(r.PDBs, name) {
			t.Errorf("%s: PodDisruptionBudget missing", name)
		}
		if !hasNamed(r.HPAs, name) {
			t.Errorf("%s: HorizontalPodAutoscaler missing", name)
		}
		if !hasNamed(r.NetworkPolicies, name) {
			t.Errorf("%s: NetworkPolicy missing", name)
		}
	}
	for _, d := range r.Deployments {
		if d.Namespace == "" {
			t.Errorf("Deployment %s has no namespace: the render must set one", d.Name)
		}
	}
	// Images are built by a stage of the Dockerfile.
	for _, d := range r.Deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			repo, _, _ := strings.Cut(c.Image, ":")
			name, ok := strings.CutPrefix(repo, "ghcr.io/switchboard-mcp/switchboard-")
			if ok && ImageTargets[name] == "" {
				t.Errorf("%s: image %s has no Dockerfile target %q", d.Name, c.Image, name)
			}
		}
	}
}

// TestProductionShape pins what the production overlay promises:
// PostgreSQL from CloudNativePG, mTLS from cert-manager with readiness
// probed over HTTP, and at least two replicas of each service.
func TestProductionShape(t *testing.T) {
	checkProductionShape(t, decodeClean(t, "production", build(t, "production")))
}

func checkProductionShape(t *testing.T, r *Render) {
	t.Helper()
	if len(r.Clusters) != 1 || r.Clusters[0].Spec.Instances < 2 {
		t.Errorf("want one CloudNativePG Cluster with replicas, got %d", len(r.Clusters))
	}
	idx := r.deployment("switchboard-indexer").Spec.Template.Spec.Containers[0]
	if v := envLookupValue(idx, "SWITCHBOARD_DATABASE_URL"); v != "secret:switchboard-postgres-app/uri" {
		t.Errorf("indexer database URL comes from %q, want the operator's app Secret", v)
	}
	for _, comp := range switchboardServices {
		c := r.deployment("switchboard-" + comp).Spec.Template.Spec.Containers[0]
		if envLookupValue(c, "SWITCHBOARD_TLS_CERT_FILE") == "" {
			t.Errorf("%s: no mTLS certificate configured", comp)
		}
		for kind, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "startup": c.StartupProbe, "liveness": c.LivenessProbe} {
			if pr != nil && pr.GRPC != nil {
				t.Errorf("%s: %s probe uses the kubelet's gRPC probe, which cannot speak TLS", comp, kind)
			}
		}
		for _, h := range r.HPAs {
			if h.Spec.ScaleTargetRef.Name == "switchboard-"+comp && *h.Spec.MinReplicas < 2 {
				t.Errorf("%s: production minReplicas %d < 2", comp, *h.Spec.MinReplicas)
			}
		}
	}
	if len(r.Ingresses) != 1 {
		t.Errorf("want the gateway Ingress in production, got %d Ingresses", len(r.Ingresses))
	}
	var cns []string
	for _, c := range r.Certificates {
		cns = append(cns, c.Spec.CommonName)
	}
	for _, want := range []string{"switchboard-gateway", "switchboard-aggregator", "switchboard-indexer", "switchboard-internal-client"} {
		if !slices.Contains(cns, want) {
			t.Errorf("no Certificate with common name %s (have %v)", want, cns)
		}
	}
}

func hasNamed[T interface{ GetName() string }](objs []T, name string) bool {
	return slices.ContainsFunc(objs, func(o T) bool { return o.GetName() == name })
}

func envLookupValue(c corev1.Container, name string) string {
	v, _ := envLookup(c)(name)
	return v
}

// TestComponentsUsed makes sure every component is rendered (and so
// validated) by at least one overlay.
func TestComponentsUsed(t *testing.T) {
	comps, err := filepath.Glob(filepath.Join(k8sDir, "components", "*"))
	if err != nil || len(comps) == 0 {
		t.Fatalf("no components: %v", err)
	}
	used := map[string]bool{}
	for _, overlay := range overlayDirs(t) {
		raw, err := os.ReadFile(filepath.Join(k8sDir, "overlays", overlay, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k struct {
			Components []string `json:"components"`
		}
		if err := yaml.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
		for _, c := range k.Components {
			used[filepath.Base(c)] = true
		}
	}
	for _, c := range comps {
		if !used[filepath.Base(c)] {
			t.Errorf("component %s is used by no overlay, so nothing validates it", filepath.Base(c))
		}
	}
}

// TestDeployerSecretsDocumented: every Secret the deployer must create is
// explained, with its keys, in deploy/README.md.
func TestDeployerSecretsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, keys := range DeployerSecrets {
		if !strings.Contains(string(readme), name) {
			t.Errorf("deploy/README.md does not mention Secret %s", name)
		}
		for _, k := range keys {
			if !strings.Contains(string(readme), "--from-literal="+k+"=") && !strings.Contains(string(readme), "`"+k+"`") {
				t.Errorf("deploy/README.md does not show key %s of Secret %s", k, name)
			}
		}
	}
}

func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range CheckDockerfile(string(raw), repoRoot) {
		t.Error(err)
	}
	ignore, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(ignore), "\n")
	for _, want := range []string{".git", "bin", ".bin"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
}

// The remaining tests prove the checks above can fail: each feeds a
// deliberately broken variant and expects the matching complaint.

func TestDockerfileCheckCatchesMistakes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(raw)
	cases := []struct{ name, from, to, want string }{
		{"root user", "USER 65532:65532", "USER root", "numeric non-root UID"},
		{"uid 0", "USER 65532:65532", "USER 0", "numeric non-root UID"},
		{"no user", "USER 65532:65532", "", "numeric non-root UID"},
		{"cgo", "ENV CGO_ENABLED=0 ", "ENV CGO_ENABLED=1 ", "CGO_ENABLED=0"},
		{"no trimpath", "go build -trimpath", "go build", "-trimpath"},
		{"fat base", "FROM gcr.io/distroless/static-debian12:nonroot AS runtime", "FROM debian:12 AS runtime", "not distroless"},
		{"no source label", "org.opencontainers.image.source=", "org.opencontainers.image.sauce=", "org.opencontainers.image.source missing"},
		{"binary not built", "./indexer/cmd/switchboard-indexer \\", "\\", "does not build switchboard-indexer"},
		{"platform default", "ARG TARGETARCH\n", "ARG TARGETARCH=amd64\n", "ARG TARGETARCH has a default"},
		{"one platform's binaries", "GOARCH=$TARGETARCH", "GOARCH=amd64", "GOOS and GOARCH from TARGETOS and TARGETARCH"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.from) {
				t.Fatalf("the Dockerfile no longer contains %q: update this case", tc.from)
			}
			errs := CheckDockerfile(strings.Replace(good, tc.from, tc.to, 1), repoRoot)
			expectProblem(t, errs, tc.want)
		})
	}
}

func expectProblem(t *testing.T, errs []error, want string) {
	t.Helper()
	for _, err := range errs {
		if strings.Contains(err.Error(), want) {
			return
		}
	}
	t.Errorf("no problem mentioning %q; got %v", want, errs)
}

func TestDecodeCatchesMistakes(t *testing.T) {
	dev, prod := string(build(t, "development")), string(build(t, "production"))
	cases := []struct{ name, stream, from, to, want string }{
		{"wrong type", dev, "containerPort: 8080", "containerPort: eighty", "cannot unmarshal"},
		{"unknown field", dev, "readOnlyRootFilesystem: true", "readOnlyRootFilesystm: true", `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFilesystm"`},
		{"misplaced field", dev, "  maxUnavailable: 1\n  selector:", "  maxUnavailable: 1\n  replicas: 1\n  selector:", `unknown field "spec.replicas"`},
		{"CRD wrong type", prod, "instances: 3", "instances: three", "cannot unmarshal string"},
		{"CRD unknown field", prod, "  renewBefore: 720h\n  secretName: switchboard-gateway-tls", "  renewBefore: 720h\n  secretNam: switchboard-gateway-tls", `Certificate: strict decoding error: json: unknown field "secretNam"`},
		{"unexpected kind", dev, "kind: PodDisruptionBudget", "kind: PodDisruptionBudgets", "no kind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.stream, tc.from) {
				t.Fatalf("render no longer contains %q: update this case", tc.from)
			}
			_, errs := Decode(tc.name, []byte(strings.Replace(tc.stream, tc.from, tc.to, 1)))
			expectProblem(t, errs, tc.want)
		})
	}
}

func TestCheckCatchesMistakes(t *testing.T) {
	dev := build(t, "development")
	container := func(r *Render, name string) *corev1.Container {
		return &r.deployment(name).Spec.Template.Spec.Containers[0]
	}
	setEnvSecret := func(c *corev1.Container, env, secret string) {
		for i := range c.Env {
			if c.Env[i].Name == env {
				c.Env[i].ValueFrom.SecretKeyRef.Name = secret
			}
		}
	}
	editConfig := func(r *Render, from, to string) {
		for _, cm := range r.ConfigMaps {
			if v, ok := cm.Data["switchboard.yaml"]; ok {
				if !strings.Contains(v, from) {
					t.Fatalf("config lacks %q", from)
				}
				cm.Data["switchboard.yaml"] = strings.Replace(v, from, to, 1)
			}
		}
	}
	cases := []struct {
		name   string
		mutate func(r *Render)
		want   string
	}{
		{"indexer startup probe waits for the database", func(r *Render) {
			container(r, "switchboard-indexer").StartupProbe = &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 50052}},
				PeriodSeconds:    2,
				FailureThreshold: 60,
			}
		}, "Deployment switchboard-indexer container indexer: the startup probe waits for health"},
		{"service selects nothing", func(r *Render) {
			r.service("switchboard-gateway").Spec.Selector["app.kubernetes.io/component"] = "gatewy"
		}, "Service switchboard-gateway selects no pod"},
		{"service target port missing", func(r *Render) {
			container(r, "switchboard-aggregator").Ports[0].Name = "grpcx"
		}, "targets grpc, which Deployment switchboard-aggregator does not expose"},
		{"unknown secret", func(r *Render) {
			setEnvSecret(container(r, "switchboard-indexer"), "SWITCHBOARD_DATABASE_URL", "switchboard-db")
		}, "reads Secret switchboard-db"},
		{"probe on a closed port", func(r *Render) {
			container(r, "switchboard-aggregator").ReadinessProbe.GRPC.Port = 50099
		}, "gRPC port 50099 is not a container port"},
		{"listen port differs from container port", func(r *Render) {
			editConfig(r, "listen: 0.0.0.0:8080", "listen: 0.0.0.0:8081")
		}, "gateway.listen is \"0.0.0.0:8081\" but container port http is 8080"},
		{"config typo", func(r *Render) {
			editConfig(r, "otlpEndpoint:", "otlpEndpont:")
		}, "field otlpEndpont not found"},
		{"endpoint to the wrong service", func(r *Render) {
			editConfig(r, "address: dns:///switchboard-indexer-headless:50052", "address: dns:///switchboard-aggregator-headless:50051")
		}, "reaches aggregator, not the indexer"},
		{"plain address of a headless Service", func(r *Render) {
			editConfig(r, "address: dns:///switchboard-indexer-headless:50052", "address: switchboard-indexer-headless:50052")
		}, "a plain host:port connects to one pod at a time"},
		{"dns address of a ClusterIP Service", func(r *Render) {
			editConfig(r, "address: dns:///switchboard-indexer-headless:50052", "address: dns:///switchboard-indexer:50052")
		}, "Service switchboard-indexer is not headless"},
		{"dns address with its own DNS server", func(r *Render) {
			editConfig(r, "address: dns:///switchboard-indexer-headless:50052", "address: dns://10.0.0.10/switchboard-indexer-headless:50052")
		}, "resolved by the cluster's DNS"},
		{"headless Service publishing unready pods", func(r *Render) {
			r.service("switchboard-aggregator-headless").Spec.PublishNotReadyAddresses = true
		}, "Service switchboard-aggregator-headless publishes pods that are not ready"},
		{"connection age too short", func(r *Render) {
			editConfig(r, "maxConnectionAge: 5m", "maxConnectionAge: 1s")
		}, "grpc.maxConnectionAge: is under 10s"},
		{"network policy peer matches nothing", func(r *Render) {
			for _, np := range r.NetworkPolicies {
				if np.Name == "switchboard-aggregator" {
					np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] = "gw"
				}
			}
		}, "NetworkPolicy switchboard-aggregator ingress[0].from[0] selects no pod"},
		{"network policy on a missing port", func(r *Render) {
			for _, np := range r.NetworkPolicies {
				if np.Name == "switchboard-indexer" {
					np.Spec.Ingress[0].Ports[0].Port.StrVal = "grpcs"
				}
			}
		}, "allows port grpcs"},
		{"root pod", func(r *Render) {
			f := false
			r.deployment("switchboard-gateway").Spec.Template.Spec.SecurityContext.RunAsNonRoot = &f
		}, "runAsNonRoot must be true"},
		{"aggregator as PID 1", func(r *Render) {
			r.deployment("switchboard-aggregator").Spec.Template.Spec.ShareProcessNamespace = nil
		}, "Deployment switchboard-aggregator: shareProcessNamespace must be true"},
		{"inline secret", func(r *Render) {
			r.Secrets = append(r.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "oops"}})
		}, "Secret oops is written into the manifests"},
		{"shared session key missing", func(r *Render) {
			c := container(r, "switchboard-gateway")
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SWITCHBOARD_SESSION_KEY" })
		}, "gateway.sessions.key"},
		{"server lacks a caller's token", func(r *Render) {
			c := container(r, "switchboard-aggregator")
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SWITCHBOARD_INDEXER_TOKEN_SHA256" })
		}, "indexer.aggregator.token is not a principal-asserting credential of the aggregator"},
		{"missing config map", func(r *Render) {
			vols := r.deployment("switchboard-indexer").Spec.Template.Spec.Volumes
			for i := range vols {
				if vols[i].ConfigMap != nil {
					vols[i].ConfigMap.Name = "switchboard-conf"
				}
			}
		}, "mounts ConfigMap switchboard-conf, which is not in the render"},
		{"HPA target missing", func(r *Render) {
			r.HPAs[0].Spec.ScaleTargetRef.Name = "nothing"
		}, "which is not a Deployment of the render"},
		{"replicas next to an HPA", func(r *Render) {
			n := int32(3)
			r.deployment("switchboard-gateway").Spec.Replicas = &n
		}, "sets replicas although HorizontalPodAutoscaler"},
		{"collector exporter undefined", func(r *Render) {
			for _, cm := range r.ConfigMaps {
				if v, ok := cm.Data["config.yaml"]; ok {
					cm.Data["config.yaml"] = strings.Replace(v, "exporters: [debug]", "exporters: [otlp]", 1)
				}
			}
		}, "uses undefined exporter otlp"},
		{"missing resource limits", func(r *Render) {
			delete(container(r, "switchboard-indexer").Resources.Limits, corev1.ResourceMemory)
		}, "no memory limit"},
		{"writable root filesystem", func(r *Render) {
			f := false
			container(r, "switchboard-gateway").SecurityContext.ReadOnlyRootFilesystem = &f
		}, "readOnlyRootFilesystem must be true"},
		{"port declared but nothing listens", func(r *Render) {
			editConfig(r, "httpListen: 0.0.0.0:9090", "httpListen: \"\"")
		}, "container port http is declared but aggregator.httpListen is empty"},
		{"ingress to a missing port", func(r *Render) {
			ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "extra"}}
			ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "switchboard-gateway", Port: networkingv1.ServiceBackendPort{Name: "https"}}}
			r.Ingresses = append(r.Ingresses, ing)
		}, "Ingress extra: Service switchboard-gateway has no port \"https\""},
		{"ingress exposing the aggregator", func(r *Render) {
			ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "leak"}}
			ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "switchboard-aggregator", Port: networkingv1.ServiceBackendPort{Name: "grpc"}}}
			r.Ingresses = append(r.Ingresses, ing)
		}, "only the gateway may be reachable from outside"},
		{"untagged image", func(r *Render) {
			container(r, "switchboard-gateway").Image = "ghcr.io/switchboard-mcp/switchboard-gateway"
		}, "must carry a release tag"},
		{"aggregator lacks its own token", func(r *Render) {
			c := container(r, "switchboard-aggregator")
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SWITCHBOARD_AGGREGATOR_AGGREGATOR_TOKEN" })
		}, "aggregator.peers.token is empty: the pod lacks the secret it references"},
		{"aggregator credential allows more than ResumeHeldCall", func(r *Render) {
			editConfig(r, "        - switchboard.aggregator.v1.AggregatorService/ResumeHeldCall\n", "        - switchboard.aggregator.v1.AggregatorService/ResumeHeldCall\n        - switchboard.aggregator.v1.AggregatorService/CallTool\n")
		}, "it must allow exactly [switchboard.aggregator.v1.AggregatorService/ResumeHeldCall switchboard.indexer.v1.IndexerService/RecordToolDefinitions switchboard.indexer.v1.IndexerService/WatchToolDefinitions switchboard.indexer.v1.IndexerService/AcquireRateTokens switchboard.indexer.v1.IndexerService/RecordAuditEvents switchboard.indexer.v1.ClusterStateService/CreateTask"},
		{"aggregator credential allows its whole service", func(r *Render) {
			editConfig(r, "        - switchboard.aggregator.v1.AggregatorService/ResumeHeldCall\n", "        - switchboard.aggregator.v1.AggregatorService/*\n")
		}, "it must allow exactly"},
		{"aggregator credential does not assert principals", func(r *Render) {
			editConfig(r, "      commonName: switchboard-aggregator\n      assertPrincipals: true\n", "      commonName: switchboard-aggregator\n")
		}, "aggregator.peers.token is not a principal-asserting credential of the aggregator"},
		{"peers unset with several replicas", func(r *Render) {
			editConfig(r, "  peers:\n    dns: switchboard-aggregator-headless:50051\n    token: ${SWITCHBOARD_AGGREGATOR_AGGREGATOR_TOKEN:-}\n", "")
		}, "aggregator.peers is unset but up to 2 replicas run"},
		{"peers.dns names a missing Service", func(r *Render) {
			editConfig(r, "dns: switchboard-aggregator-headless:50051", "dns: switchboard-aggregators:50051")
		}, `aggregator.peers.dns "switchboard-aggregators:50051": no Service "switchboard-aggregators"`},
		{"peers.dns names the ClusterIP Service", func(r *Render) {
			editConfig(r, "dns: switchboard-aggregator-headless:50051", "dns: switchboard-aggregator:50051")
		}, "Service switchboard-aggregator is not headless"},
		{"peers.dns on a port the Service lacks", func(r *Render) {
			editConfig(r, "dns: switchboard-aggregator-headless:50051", "dns: switchboard-aggregator-headless:9090")
		}, "Service switchboard-aggregator-headless has no port 9090"},
		{"peers.dns port other than the listen port", func(r *Render) {
			svc := r.service("switchboard-aggregator-headless")
			svc.Spec.Ports[0].Port = 443
			editConfig(r, "dns: switchboard-aggregator-headless:50051", "dns: switchboard-aggregator-headless:443")
		}, "a peer is dialled at its pod IP with port 443, but a replica listens on and advertises port 50051"},
		{"peers.dns names the indexers", func(r *Render) {
			editConfig(r, "dns: switchboard-aggregator-headless:50051", "dns: switchboard-indexer-headless:50052")
		}, `aggregator.peers.dns "switchboard-indexer-headless:50052" reaches indexer, not the aggregator`},
		{"peers.dns written as a gRPC target", func(r *Render) {
			editConfig(r, "dns: switchboard-aggregator-headless:50051", "dns: dns:///switchboard-aggregator-headless:50051")
		}, "must be name:port, not a gRPC target"},
		{"POD_IP from the wrong field", func(r *Render) {
			for i, e := range container(r, "switchboard-aggregator").Env {
				if e.Name == "POD_IP" {
					container(r, "switchboard-aggregator").Env[i].ValueFrom.FieldRef.FieldPath = "status.hostIP"
				}
			}
		}, "env POD_IP must come from the downward API (fieldRef status.podIP)"},
		{"POD_IP missing", func(r *Render) {
			c := container(r, "switchboard-aggregator")
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_IP" })
		}, "env POD_IP must come from the downward API"},
		{"advertise address shared by the replicas", func(r *Render) {
			editConfig(r, "  peers:\n", "  advertiseAddress: 10.0.0.7:50051\n  peers:\n")
		}, `aggregator.advertiseAddress is "10.0.0.7:50051", shared by every replica`},
		{"network policy without aggregator to aggregator", func(r *Render) {
			dropPolicyPeer(t, r, "switchboard-aggregator", "aggregator")
		}, "no NetworkPolicy rule admits aggregator pods to aggregator pods on port 50051"},
		{"network policy without aggregator to indexer under pinning", func(r *Render) {
			dropPolicyPeer(t, r, "switchboard-indexer", "aggregator")
		}, "Deployment switchboard-aggregator: no NetworkPolicy rule admits its pods to those of Deployment switchboard-indexer on port 50052"},
		{"pinning with an unknown mode", func(r *Render) {
			editConfig(r, "    mode: warn\n", "    mode: strict\n")
		}, "aggregator.pinning.mode: want off, warn or pin"},
		{"pinning token the indexer does not know", func(r *Render) {
			c := container(r, "switchboard-aggregator")
			c.Env = append(c.Env, corev1.EnvVar{Name: "SWITCHBOARD_GATEWAY_INDEXER_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: ServiceTokensSecret}, Key: "gateway-indexer"}}})
			editConfig(r, "      address: dns:///switchboard-indexer-headless:50052\n      token: ${SWITCHBOARD_AGGREGATOR_INDEXER_TOKEN:-}\n",
				"      address: dns:///switchboard-indexer-headless:50052\n      token: ${SWITCHBOARD_GATEWAY_INDEXER_TOKEN:-}\n")
		}, "the indexer's credential for aggregator.pinning.indexer.token does not allow switchboard.indexer.v1.IndexerService/RecordToolDefinitions"},
		{"pinning to the indexer without the Service", func(r *Render) {
			editConfig(r, "      address: dns:///switchboard-indexer-headless:50052\n", "      address: switchboard-indexer:50052\n")
		}, "aggregator.pinning.indexer.address"},
		{"console credential allowed a call", func(r *Render) {
			editConfig(r, "        - switchboard.indexer.v1.IndexerService/ListRateLimitBuckets\n", "        - switchboard.indexer.v1.IndexerService/ListRateLimitBuckets\n        - switchboard.aggregator.v1.AggregatorService/CallTool\n")
		}, "for gateway.console.aggregatorToken must be operator and assertPrincipals and allow exactly"},
		{"console credential not an operator", func(r *Render) {
			editConfig(r, "      hostedBy: gateway\n      operator: true\n", "      hostedBy: gateway\n")
		}, "for gateway.console.aggregatorToken must be operator"},
		{"console token unknown", func(r *Render) {
			editConfig(r, "  aggregatorToken: ${SWITCHBOARD_CONSOLE_AGGREGATOR_TOKEN:-}\n", "  aggregatorToken: ${SWITCHBOARD_CONSOLE_OTHER:-}\n")
		}, "gateway.console.serviceToken is not a credential of the aggregator"},
		{"ops port differs from the container port", func(r *Render) {
			editConfig(r, "opsListen: 0.0.0.0:9090", "opsListen: 0.0.0.0:9091")
		}, "gateway.opsListen"},
		{"network policy without the gateway", func(r *Render) {
			dropPolicyPeer(t, r, "switchboard-aggregator", "gateway")
		}, "Deployment switchboard-gateway: no NetworkPolicy rule admits its pods to those of Deployment switchboard-aggregator on port 50051"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeClean(t, "development", dev)
			if errs := Check(r); len(errs) != 0 {
				t.Fatalf("unmodified render has problems: %v", errs)
			}
			tc.mutate(r)
			expectProblem(t, Check(r), tc.want)
		})
	}
	// A stdio server runs in the aggregator's pod: it has no host to
	// resolve, and is no mistake.
	t.Run("a stdio backend", func(t *testing.T) {
		r := decodeClean(t, "development", dev)
		editConfig(r, "      url: http://switchboard-demo-backend:9101/mcp\n",
			"      url: http://switchboard-demo-backend:9101/mcp\n    - name: files\n      command: [mcp-server-filesystem, /data]\n")
		if errs := Check(r); len(errs) != 0 {
			t.Fatalf("a stdio backend: %v", errs)
		}
	})
}

// TestCheckCatchesCertificateWithoutTargetName: with mTLS (production),
// the clients check the headless Service's name in the server
// certificate, so the Certificate must list it.
func TestCheckCatchesCertificateWithoutTargetName(t *testing.T) {
	r := decodeClean(t, "production", build(t, "production"))
	if errs := Check(r); len(errs) != 0 {
		t.Fatalf("unmodified render has problems: %v", errs)
	}
	for _, c := range r.Certificates {
		if c.Metadata.Name == "switchboard-aggregator" {
			c.Spec.DNSNames = slices.DeleteFunc(c.Spec.DNSNames, func(n string) bool { return n == "switchboard-aggregator-headless" })
		}
	}
	expectProblem(t, Check(r), `the client checks that the server certificate names "switchboard-aggregator-headless"`)
}

// dropPolicyPeer removes the peer selecting component from the ingress
// rules of NetworkPolicy policy.
func dropPolicyPeer(t *testing.T, r *Render, policy, component string) {
	t.Helper()
	dropped := false
	for _, np := range r.NetworkPolicies {
		if np.Name != policy {
			continue
		}
		for i := range np.Spec.Ingress {
			np.Spec.Ingress[i].From = slices.DeleteFunc(np.Spec.Ingress[i].From, func(p networkingv1.NetworkPolicyPeer) bool {
				drop := p.NamespaceSelector == nil && p.PodSelector != nil && p.PodSelector.MatchLabels["app.kubernetes.io/component"] == component
				dropped = dropped || drop
				return drop
			})
		}
	}
	if !dropped {
		t.Fatalf("NetworkPolicy %s admits no %s pods: update this case", policy, component)
	}
}

// TestCheckCatchesPeerTLSMistakes: under mTLS (production) an aggregator
// dials its peers by pod IP, so it must check a server name their
// certificate holds, and present a client certificate that names the
// aggregators' credential.
func TestCheckCatchesPeerTLSMistakes(t *testing.T) {
	prod := build(t, "production")
	aggregator := func(r *Render) *corev1.Container {
		return &r.deployment("switchboard-aggregator").Spec.Template.Spec.Containers[0]
	}
	aggCert := func(r *Render) *Certificate {
		for _, c := range r.Certificates {
			if c.Metadata.Name == "switchboard-aggregator" {
				return c
			}
		}
		t.Fatal("no Certificate switchboard-aggregator")
		return nil
	}
	cases := []struct {
		name   string
		mutate func(r *Render)
		want   string
	}{
		{"no server name", func(r *Render) {
			c := aggregator(r)
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SWITCHBOARD_TLS_SERVER_NAME" })
		}, "a peer is dialled by its pod IP, which no Certificate names, and serviceAuth.tls.serverName is empty"},
		{"server name the certificate lacks", func(r *Render) {
			for i, e := range aggregator(r).Env {
				if e.Name == "SWITCHBOARD_TLS_SERVER_NAME" {
					aggregator(r).Env[i].Value = "switchboard-aggregator-peers"
				}
			}
		}, `aggregator.peers (serviceAuth.tls.serverName): the client checks that the server certificate names "switchboard-aggregator-peers"`},
		{"certificate without client auth", func(r *Render) {
			c := aggCert(r)
			c.Spec.Usages = slices.DeleteFunc(c.Spec.Usages, func(u string) bool { return u == "client auth" })
		}, `Certificate switchboard-aggregator lacks the usage "client auth"`},
		{"certificate without the URI SAN", func(r *Render) {
			aggCert(r).Spec.URIs = nil
		}, "Certificate switchboard-aggregator does not carry the URI SAN spiffe://switchboard/aggregator of credential aggregator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeClean(t, "production", prod)
			if errs := Check(r); len(errs) != 0 {
				t.Fatalf("unmodified render has problems: %v", errs)
			}
			tc.mutate(r)
			expectProblem(t, Check(r), tc.want)
		})
	}
}
