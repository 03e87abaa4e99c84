package validate

import (
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func checkNetworkPolicy(p *problems, np *networkingv1.NetworkPolicy, groups []podGroup) {
	name := "NetworkPolicy " + np.Name
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		p.addf("%s: %v", name, err)
		return
	}
	targets := selectorMatches(sel, groups)
	if len(targets) == 0 {
		p.addf("%s selects no pod", name)
	}
	for i, rule := range np.Spec.Ingress {
		for j, peer := range rule.From {
			if peer.PodSelector == nil || peer.NamespaceSelector != nil {
				// Peers in other namespaces (internal clients, scrapers,
				// the CloudNativePG operator) are outside the render.
				continue
			}
			ps, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			if err != nil {
				p.addf("%s ingress[%d].from[%d]: %v", name, i, j, err)
				continue
			}
			if len(selectorMatches(ps, groups)) == 0 {
				p.addf("%s ingress[%d].from[%d] selects no pod of the render", name, i, j)
			}
		}
		for _, port := range rule.Ports {
			if port.Port == nil {
				continue
			}
			found := false
			for _, g := range targets {
				found = found || g.hasPort(*port.Port)
			}
			if !found {
				p.addf("%s ingress[%d] allows port %s, which none of its pods exposes", name, i, port.Port.String())
			}
		}
	}
}

func checkCRDs(p *problems, r *Render) {
	for _, c := range r.Clusters {
		name := "Cluster " + c.Metadata.Name
		if c.Kind != "Cluster" || c.APIVersion != cnpgAPIVersion {
			p.addf("%s: wrong apiVersion/kind", name)
		}
		if c.Spec.Instances < 1 {
			p.addf("%s: instances must be at least 1", name)
		}
		if _, err := resource.ParseQuantity(c.Spec.Storage.Size); err != nil {
			p.addf("%s: storage.size %q: %v", name, c.Spec.Storage.Size, err)
		}
		if s := c.Spec.PrimaryUpdateStrategy; s != "" && !cnpgStrategies[s] {
			p.addf("%s: primaryUpdateStrategy %q is not supervised or unsupervised", name, s)
		}
		if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.InitDB == nil || c.Spec.Bootstrap.InitDB.Database == "" || c.Spec.Bootstrap.InitDB.Owner == "" {
			p.addf("%s: bootstrap.initdb must name the database and its owner", name)
		}
	}
	caSecrets := map[string]bool{}
	for _, c := range r.Certificates {
		if c.Spec.IsCA {
			caSecrets[c.Spec.SecretName] = true
		}
	}
	issuers := map[string]bool{}
	for _, is := range r.Issuers {
		issuers[is.Metadata.Name] = true
		name := "Issuer " + is.Metadata.Name
		if boolCount(is.Spec.SelfSigned != nil, is.Spec.CA != nil) != 1 {
			p.addf("%s: exactly one of selfSigned and ca must be set", name)
		}
		if is.Spec.CA != nil && !caSecrets[is.Spec.CA.SecretName] {
			p.addf("%s: CA Secret %s is not issued by a CA Certificate of the render", name, is.Spec.CA.SecretName)
		}
	}
	for _, c := range r.Certificates {
		name := "Certificate " + c.Metadata.Name
		s := c.Spec
		if s.SecretName == "" {
			p.addf("%s: no secretName", name)
		}
		if s.IssuerRef.Kind != "Issuer" || s.IssuerRef.Group != "cert-manager.io" || !issuers[s.IssuerRef.Name] {
			p.addf("%s: issuerRef %s/%s %s is not an Issuer of the render", name, s.IssuerRef.Group, s.IssuerRef.Kind, s.IssuerRef.Name)
		}
		if s.CommonName == "" && len(s.DNSNames) == 0 {
			p.addf("%s: needs a commonName or dnsNames", name)
		}
		var dur, renew time.Duration
		var err error
		if s.Duration != "" {
			if dur, err = time.ParseDuration(s.Duration); err != nil {
				p.addf("%s: duration: %v", name, err)
			}
		}
		if s.RenewBefore != "" {
			if renew, err = time.ParseDuration(s.RenewBefore); err != nil {
				p.addf("%s: renewBefore: %v", name, err)
			}
			if dur > 0 && renew >= dur {
				p.addf("%s: renewBefore must be shorter than duration", name)
			}
		}
		for _, u := range s.Usages {
			if !certUsages[u] {
				p.addf("%s: unknown usage %q", name, u)
			}
		}
		if k := s.PrivateKey; k != nil {
			if k.Algorithm != "" && !keyAlgorithms[k.Algorithm] {
				p.addf("%s: unknown key algorithm %q", name, k.Algorithm)
			}
			if k.RotationPolicy != "" && !rotationPolices[k.RotationPolicy] {
				p.addf("%s: unknown rotationPolicy %q", name, k.RotationPolicy)
			}
		}
	}
}

// checkIngress requires every backend of an Ingress to be a Service port of
// the render, and only the gateway to be exposed.
func checkIngress(p *problems, r *Render, ing *networkingv1.Ingress) {
	name := "Ingress " + ing.Name
	var backends []*networkingv1.IngressServiceBackend
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
		backends = append(backends, b.Service)
	}
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for _, path := range rule.HTTP.Paths {
			if path.Backend.Service == nil {
				p.addf("%s: path %s has no Service backend", name, path.Path)
				continue
			}
			backends = append(backends, path.Backend.Service)
		}
	}
	if len(backends) == 0 {
		p.addf("%s routes to nothing", name)
	}
	for _, b := range backends {
		svc := r.service(b.Name)
		if svc == nil {
			p.addf("%s: backend Service %s is not in the render", name, b.Name)
			continue
		}
		if svc.Spec.Selector["app.kubernetes.io/component"] != "gateway" {
			p.addf("%s: exposes Service %s; only the gateway may be reachable from outside", name, b.Name)
		}
		found := false
		for _, sp := range svc.Spec.Ports {
			found = found || (b.Port.Name != "" && sp.Name == b.Port.Name) || (b.Port.Number != 0 && sp.Port == b.Port.Number)
		}
		if !found {
			p.addf("%s: Service %s has no port %q/%d", name, b.Name, b.Port.Name, b.Port.Number)
		}
	}
}
