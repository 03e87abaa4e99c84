package validate

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DeployerSecrets are the Secrets the person deploying Switchboard creates
// (deploy/README.md shows how), with the keys the manifests read. Nothing
// else may be referenced unless an operator in the render creates it.
var DeployerSecrets = map[string][]string{
	// One token per client→server pair, and its SHA-256 (tokens.go).
	ServiceTokensSecret:      servicePairs,
	ServiceTokenDigestSecret: servicePairs,
	"switchboard-gateway":    {"session-key", "api-key-operator", "console-operator-key"},
	"switchboard-database":   {"url"},
}

type problems []error

func (p *problems) addf(format string, args ...any) {
	*p = append(*p, fmt.Errorf(format, args...))
}

// podGroup is a set of identical pods the render will run: a Deployment's
// template, or the instances a CloudNativePG Cluster creates.
type podGroup struct {
	name   string
	labels labels.Set
	ports  map[string]int32 // named container ports
	// numbers holds every container port number.
	numbers    map[int32]bool
	deployment *appsv1.Deployment
}

func (g podGroup) hasPort(p intstr.IntOrString) bool {
	if p.Type == intstr.String {
		_, ok := g.ports[p.StrVal]
		return ok
	}
	return g.numbers[p.IntVal]
}

func (g podGroup) portNumber(p intstr.IntOrString) (int32, bool) {
	if p.Type == intstr.String {
		n, ok := g.ports[p.StrVal]
		return n, ok
	}
	return p.IntVal, g.numbers[p.IntVal]
}

func (r *Render) podGroups() []podGroup {
	var out []podGroup
	for _, d := range r.Deployments {
		g := podGroup{name: "Deployment " + d.Name, labels: labels.Set(d.Spec.Template.Labels),
			ports: map[string]int32{}, numbers: map[int32]bool{}, deployment: d}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name != "" {
					g.ports[p.Name] = p.ContainerPort
				}
				g.numbers[p.ContainerPort] = true
			}
		}
		out = append(out, g)
	}
	for _, c := range r.Clusters {
		g := podGroup{name: "CloudNativePG Cluster " + c.Metadata.Name,
			labels: labels.Set{"cnpg.io/cluster": c.Metadata.Name}, ports: map[string]int32{}, numbers: map[int32]bool{}}
		for n, p := range cnpgPodPorts {
			g.ports[n] = p
			g.numbers[p] = true
		}
		out = append(out, g)
	}
	return out
}

func selectorMatches(sel labels.Selector, groups []podGroup) []podGroup {
	var out []podGroup
	for _, g := range groups {
		if sel.Matches(g.labels) {
			out = append(out, g)
		}
	}
	return out
}

// availableSecrets maps each Secret the render may reference to its keys:
// the deployer's Secrets and those the operators create from objects in
// the render.
func (r *Render) availableSecrets() map[string][]string {
	out := map[string][]string{}
	for n, keys := range DeployerSecrets {
		out[n] = keys
	}
	for _, c := range r.Certificates {
		out[c.Spec.SecretName] = certificateSecretKeys
	}
	for _, c := range r.Clusters {
		out[c.Metadata.Name+"-app"] = cnpgAppSecretKeys
		out[c.Metadata.Name+"-ca"] = cnpgCASecretKeys
	}
	return out
}

// Check cross-checks a decoded render and returns every problem found.
func Check(r *Render) []error {
	var p problems
	groups := r.podGroups()
	secrets := r.availableSecrets()

	for _, s := range r.Secrets {
		p.addf("Secret %s is written into the manifests: secrets must be references to Secrets created outside them", s.Name)
	}
	for _, d := range r.Deployments {
		checkDeployment(&p, r, d, secrets)
	}
	for _, s := range r.Services {
		if len(s.Spec.Selector) == 0 {
			p.addf("Service %s has no selector", s.Name)
			continue
		}
		matched := selectorMatches(labels.SelectorFromSet(s.Spec.Selector), groups)
		if len(matched) == 0 {
			p.addf("Service %s selects no pod (selector %v)", s.Name, s.Spec.Selector)
		}
		for _, sp := range s.Spec.Ports {
			for _, g := range matched {
				if !g.hasPort(sp.TargetPort) {
					p.addf("Service %s port %s targets %s, which %s does not expose", s.Name, sp.Name, sp.TargetPort.String(), g.name)
				}
			}
		}
	}
	budgeted := map[string]bool{}
	for _, b := range r.PDBs {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			p.addf("PodDisruptionBudget %s: %v", b.Name, err)
			continue
		}
		matched := selectorMatches(sel, groups)
		if len(matched) == 0 {
			p.addf("PodDisruptionBudget %s selects no pod", b.Name)
		}
		for _, g := range matched {
			budgeted[g.name] = true
		}
	}
	// A Deployment without one may lose every replica to one node drain
	// (the collector's two in production: every trace dropped meanwhile).
	for _, g := range groups {
		if g.deployment != nil && !budgeted[g.name] {
			p.addf("%s has no PodDisruptionBudget", g.name)
		}
	}
	for _, h := range r.HPAs {
		ref := h.Spec.ScaleTargetRef
		d := r.deployment(ref.Name)
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || d == nil {
			p.addf("HorizontalPodAutoscaler %s scales %s %s %s, which is not a Deployment of the render", h.Name, ref.APIVersion, ref.Kind, ref.Name)
			continue
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			p.addf("HorizontalPodAutoscaler %s: need 1 <= minReplicas <= maxReplicas", h.Name)
		}
		if d.Spec.Replicas != nil {
			p.addf("Deployment %s sets replicas although HorizontalPodAutoscaler %s owns the count: every apply would reset it", d.Name, h.Name)
		}
		for _, m := range h.Spec.Metrics {
			if m.Resource == nil {
				continue
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if _, ok := c.Resources.Requests[m.Resource.Name]; !ok {
					p.addf("HorizontalPodAutoscaler %s scales on %s utilization but container %s of %s requests no %s", h.Name, m.Resource.Name, c.Name, d.Name, m.Resource.Name)
				}
			}
		}
	}
	for _, np := range r.NetworkPolicies {
		checkNetworkPolicy(&p, np, groups)
	}
	for _, ing := range r.Ingresses {
		checkIngress(&p, r, ing)
	}
	checkCRDs(&p, r)
	checkSwitchboardConfig(&p, r)
	checkCollectorConfig(&p, r)
	return p
}

func checkDeployment(p *problems, r *Render, d *appsv1.Deployment, secrets map[string][]string) {
	name := "Deployment " + d.Name
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		p.addf("%s: selector does not match its pod template labels", name)
	}
	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName == "" {
		p.addf("%s: no serviceAccountName", name)
	} else if !slices.ContainsFunc(r.ServiceAccounts, func(sa *corev1.ServiceAccount) bool { return sa.Name == spec.ServiceAccountName }) {
		p.addf("%s: ServiceAccount %s is not in the render", name, spec.ServiceAccountName)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		p.addf("%s: automountServiceAccountToken must be false (no Switchboard pod talks to the Kubernetes API)", name)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		p.addf("%s: pod securityContext.runAsNonRoot must be true", name)
	}
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		p.addf("%s: pod securityContext.runAsUser must be a non-zero UID", name)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		p.addf("%s: pod seccompProfile must be RuntimeDefault", name)
	}
	if d.Spec.Template.Labels["app.kubernetes.io/component"] == "aggregator" && (spec.ShareProcessNamespace == nil || !*spec.ShareProcessNamespace) {
		p.addf("%s: shareProcessNamespace must be true: the aggregator would be PID 1, which never reaps what its stdio servers leave behind", name)
	}
	if d.Spec.Template.Labels["app.kubernetes.io/component"] == "indexer" {
		for _, c := range spec.Containers {
			if pr := c.StartupProbe; pr != nil && (pr.GRPC != nil || pr.HTTPGet != nil && pr.HTTPGet.Path == "/readyz") {
				p.addf("%s container %s: the startup probe waits for health, which the indexer reports only once PostgreSQL took its migrations: an indexer started during a database outage would be restarted in a loop", name, c.Name)
			}
		}
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		switch {
		case v.ConfigMap != nil:
			cm := r.configMap(v.ConfigMap.Name)
			if cm == nil {
				p.addf("%s: volume %s mounts ConfigMap %s, which is not in the render", name, v.Name, v.ConfigMap.Name)
				continue
			}
			for _, it := range v.ConfigMap.Items {
				if _, ok := cm.Data[it.Key]; !ok {
					p.addf("%s: volume %s wants key %s of ConfigMap %s, which it lacks", name, v.Name, it.Key, cm.Name)
				}
			}
		case v.Secret != nil:
			keys, ok := secrets[v.Secret.SecretName]
			if !ok {
				p.addf("%s: volume %s mounts Secret %s, which neither the deployer (deploy/README.md) nor an operator in the render creates", name, v.Name, v.Secret.SecretName)
				continue
			}
			for _, it := range v.Secret.Items {
				if !slices.Contains(keys, it.Key) {
					p.addf("%s: volume %s wants key %s of Secret %s, which it lacks", name, v.Name, it.Key, v.Secret.SecretName)
				}
			}
		case v.EmptyDir != nil:
		default:
			p.addf("%s: volume %s has a type the validator does not know", name, v.Name)
		}
	}

	g := podGroup{ports: map[string]int32{}, numbers: map[int32]bool{}}
	for _, c := range spec.Containers {
		for _, port := range c.Ports {
			if port.Name != "" {
				g.ports[port.Name] = port.ContainerPort
			}
			g.numbers[port.ContainerPort] = true
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		cname := fmt.Sprintf("%s container %s", name, c.Name)
		if !strings.Contains(c.Image, ":") || strings.HasSuffix(c.Image, ":latest") {
			p.addf("%s: image %q must carry a release tag", cname, c.Image)
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			p.addf("%s: readOnlyRootFilesystem must be true", cname)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			p.addf("%s: allowPrivilegeEscalation must be false", cname)
		}
		if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			p.addf("%s: capabilities must drop ALL and add none", cname)
		}
		if sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			p.addf("%s: runs as root", cname)
		}
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[res]; !ok {
				p.addf("%s: no %s request", cname, res)
			}
			if _, ok := c.Resources.Limits[res]; !ok {
				p.addf("%s: no %s limit", cname, res)
			}
		}
		if c.ReadinessProbe == nil || c.LivenessProbe == nil {
			p.addf("%s: needs a readiness and a liveness probe", cname)
		}
		for kind, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
			checkProbe(p, fmt.Sprintf("%s %s probe", cname, kind), pr, g)
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
				cm := r.configMap(ref.Name)
				if cm == nil {
					p.addf("%s: env %s reads ConfigMap %s, which is not in the render", cname, e.Name, ref.Name)
				} else if _, ok := cm.Data[ref.Key]; !ok {
					p.addf("%s: env %s reads key %s of ConfigMap %s, which it lacks", cname, e.Name, ref.Key, ref.Name)
				}
			}
			if ref := e.ValueFrom.SecretKeyRef; ref != nil {
				keys, ok := secrets[ref.Name]
				if !ok {
					p.addf("%s: env %s reads Secret %s, which neither the deployer (deploy/README.md) nor an operator in the render creates", cname, e.Name, ref.Name)
				} else if !slices.Contains(keys, ref.Key) {
					p.addf("%s: env %s reads key %s of Secret %s, which it lacks", cname, e.Name, ref.Key, ref.Name)
				}
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil && r.configMap(ef.ConfigMapRef.Name) == nil {
				p.addf("%s: envFrom ConfigMap %s is not in the render", cname, ef.ConfigMapRef.Name)
			}
			if ef.SecretRef != nil {
				if _, ok := secrets[ef.SecretRef.Name]; !ok {
					p.addf("%s: envFrom Secret %s is not created by anyone", cname, ef.SecretRef.Name)
				}
			}
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				p.addf("%s: mounts undeclared volume %s", cname, m.Name)
			}
		}
	}
}

func checkProbe(p *problems, name string, pr *corev1.Probe, g podGroup) {
	if pr == nil {
		return
	}
	switch {
	case pr.HTTPGet != nil:
		if !g.hasPort(pr.HTTPGet.Port) {
			p.addf("%s: port %s is not a container port", name, pr.HTTPGet.Port.String())
		}
		if !strings.HasPrefix(pr.HTTPGet.Path, "/") {
			p.addf("%s: path %q must start with /", name, pr.HTTPGet.Path)
		}
	case pr.TCPSocket != nil:
		if !g.hasPort(pr.TCPSocket.Port) {
			p.addf("%s: port %s is not a container port", name, pr.TCPSocket.Port.String())
		}
	case pr.GRPC != nil:
		if !g.numbers[pr.GRPC.Port] {
			p.addf("%s: gRPC port %d is not a container port", name, pr.GRPC.Port)
		}
	case pr.Exec != nil:
		p.addf("%s: exec probes cannot run in the distroless images", name)
	}
	if n := boolCount(pr.HTTPGet != nil, pr.TCPSocket != nil, pr.GRPC != nil, pr.Exec != nil); n != 1 {
		p.addf("%s: exactly one handler must be set, found %d", name, n)
	}
}

func boolCount(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
