package validate

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// expectBalancedEndpoint checks that addr reaches the wanted component
// on the container port the component listens on, and that it balances: a
// dns:/// address of a headless Service that publishes ready pods only
// (docs/operations.md, section 2). A plain host:port of a headless
// Service would send every call of a client to one pod; a dns:/// one of
// a ClusterIP Service would resolve to one virtual address. Over TLS
// (tlsCfg), the certificate of the pods behind it must name the host the
// client checks: serverName when set, the Service's name otherwise.
func (p *problems) expectBalancedEndpoint(r *Render, who, key, addr, want string, wantPort int32, tlsCfg config.TLS) {
	target, balanced := strings.CutPrefix(addr, "dns:///")
	if !balanced && strings.HasPrefix(addr, "dns:") {
		p.addf("%s: %s %q: write dns:///service:port, resolved by the cluster's DNS", who, key, addr)
		return
	}
	if err := (config.Endpoint{Address: addr}).ValidateAddress(key); err != nil {
		p.addf("%s: %v", who, err)
		return
	}
	host, port, err := hostPort(target)
	if err != nil {
		p.addf("%s: %s %q: %v", who, key, addr, err)
		return
	}
	svc := r.service(host)
	if svc == nil {
		p.addf("%s: %s %q: no Service %q in the render", who, key, addr, host)
		return
	}
	headless := svc.Spec.ClusterIP == corev1.ClusterIPNone
	switch {
	case !balanced:
		p.addf("%s: %s %q: a plain host:port connects to one pod at a time; write dns:///<headless Service>:port so the calls spread over the replicas", who, key, addr)
	case !headless:
		p.addf("%s: %s %q: Service %s is not headless (clusterIP: None), so the name resolves to one virtual address and nothing is balanced", who, key, addr, host)
	case svc.Spec.PublishNotReadyAddresses:
		p.addf("%s: %s %q: Service %s publishes pods that are not ready", who, key, addr, host)
	}
	g, port, err := r.serviceTarget(svc, port)
	if err != nil {
		p.addf("%s: %s %q: %v", who, key, addr, err)
		return
	}
	if tlsCfg.Enabled() {
		name := tlsCfg.ServerName
		if name == "" {
			name = host
		}
		p.expectCertificateNames(r, who, key, g, name)
	}
	p.expectComponent(who, key, addr, g, port, want, wantPort)
}

// expectCertificateNames checks that a Certificate whose Secret the pods
// of g mount lists name among its dnsNames.
func (p *problems) expectCertificateNames(r *Render, who, key string, g podGroup, name string) {
	if g.deployment == nil {
		return
	}
	mounted := map[string]bool{}
	for _, v := range g.deployment.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			mounted[v.Secret.SecretName] = true
		}
	}
	var certs []string
	for _, c := range r.Certificates {
		if !mounted[c.Spec.SecretName] {
			continue
		}
		certs = append(certs, c.Metadata.Name)
		if slices.Contains(c.Spec.DNSNames, name) {
			return
		}
	}
	p.addf("%s: %s: the client checks that the server certificate names %q, but no Certificate the %s mounts (%v) lists it in dnsNames", who, key, name, g.name, certs)
}
