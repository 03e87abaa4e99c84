package validate

import (
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// checkAggregatorPeers checks what forwarding the retry of a held call
// between aggregator replicas needs (aggregator.peers): the aggregators'
// own credential, allowed exactly config.AggregatorMethods; peers.dns
// naming the headless Service of the aggregator pods at the port they
// listen on; each replica advertising its own pod IP; under mTLS a server
// name the peers' certificate holds (a peer is dialled by IP) and a client
// certificate; and a NetworkPolicy that lets the replicas reach each
// other. listenPort is the aggregator's gRPC container port.
func (p *problems) checkAggregatorPeers(r *Render, d *appsv1.Deployment, c corev1.Container, cfg *config.Config, listenPort int32) {
	who := "Deployment " + d.Name
	peers := cfg.Aggregator.Peers
	if !peers.Enabled() {
		if n := maxReplicas(r, d.Name); n > 1 {
			p.addf("%s: aggregator.peers is unset but up to %d replicas run: the retry of a call a Legacy backend holds for the client's input would fail on every replica but the one holding it", who, n)
		}
		return
	}
	p.expectSet(who, "aggregator.peers.token", peers.Token)
	if peers.Token != "" {
		if err := cfg.Aggregator.ValidatePeers(); err != nil {
			p.addf("%s: %v", who, err)
		}
	}

	// The credential a peer verifies the token against asserts the end
	// user's principal, so it may resume held calls and do nothing else.
	creds := cfg.ServiceAuth.Credentials
	i := slices.IndexFunc(creds, func(cr config.ServiceCredential) bool { return namesToken(cr, peers.Token) })
	var cred config.ServiceCredential
	if i < 0 || !creds[i].AssertPrincipals {
		p.addf("%s: aggregator.peers.token is not a principal-asserting credential of the aggregator: a peer would refuse the forwarded retry", who)
	} else {
		cred = creds[i]
		got := map[string]bool{}
		for _, a := range cred.Allow {
			got[strings.TrimPrefix(a, "/")] = true
		}
		want := map[string]bool{}
		for _, m := range config.AggregatorMethods {
			want[m] = true
		}
		if !maps.Equal(got, want) {
			p.addf("%s: credential %s (aggregator.peers.token) allows %v; it must allow exactly %v (config.AggregatorMethods): it may assert any principal", who, cred.Name, cred.Allow, config.AggregatorMethods)
		}
	}

	// Every replica reads the same file, so none may fix its address
	// there: each advertises $POD_IP with the listen port.
	if cfg.Aggregator.AdvertiseAddress != "" {
		p.addf("%s: aggregator.advertiseAddress is %q, shared by every replica of the Deployment: leave it unset so that each advertises its own $%s", who, cfg.Aggregator.AdvertiseAddress, config.PodIPEnv)
	} else if !envFromField(c, config.PodIPEnv, "status.podIP") {
		p.addf("%s: env %s must come from the downward API (fieldRef status.podIP): each replica advertises $%s with the port of aggregator.listen", who, config.PodIPEnv, config.PodIPEnv)
	}

	self, ok := groupOf(r, d)
	if peers.DNS != "" {
		p.checkPeersDNS(r, who, peers.DNS, listenPort)
	}
	if len(peers.Addresses) > 0 && maxReplicas(r, d.Name) > 1 {
		p.addf("%s: aggregator.peers.addresses %v are fixed addresses, but the replicas of a Deployment get new pod IPs: use peers.dns with the headless Service", who, peers.Addresses)
	}

	tls := cfg.ServiceAuth.TLS
	if tls.Enabled() && ok {
		if tls.ServerName == "" {
			p.addf("%s: aggregator.peers: a peer is dialled by its pod IP, which no Certificate names, and serviceAuth.tls.serverName is empty: set it to a name of the aggregators' certificate (the headless Service)", who)
		} else {
			p.expectCertificateNames(r, who, "aggregator.peers (serviceAuth.tls.serverName)", self, tls.ServerName)
		}
		if tls.ClientCAFile != "" {
			p.expectClientCertificate(r, who, "aggregator.peers", d, cred)
		}
	}
	if ok && !r.admits(self, self, listenPort) {
		p.addf("%s: aggregator.peers: no NetworkPolicy rule admits aggregator pods to aggregator pods on port %d, where a retry of a held call is forwarded", who, listenPort)
	}
}

// checkPeersDNS: peers.dns resolves to the pod IPs of a headless Service
// of the aggregators, and a peer is dialled at its IP with the port of
// peers.dns, which must be the port a replica listens on and advertises.
func (p *problems) checkPeersDNS(r *Render, who, dns string, listenPort int32) {
	const key = "aggregator.peers.dns"
	if strings.Contains(dns, "/") {
		p.addf("%s: %s %q must be name:port, not a gRPC target", who, key, dns)
		return
	}
	host, port, err := hostPort(dns)
	if err != nil {
		p.addf("%s: %s %q: %v", who, key, dns, err)
		return
	}
	svc := r.service(host)
	if svc == nil {
		p.addf("%s: %s %q: no Service %q in the render", who, key, dns, host)
		return
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		p.addf("%s: %s %q: Service %s is not headless (clusterIP: None), so the name resolves to one virtual address instead of every replica's", who, key, dns, host)
	}
	g, target, err := r.serviceTarget(svc, port)
	if err != nil {
		p.addf("%s: %s %q: %v", who, key, dns, err)
		return
	}
	p.expectComponent(who, key, dns, g, target, "aggregator", listenPort)
	if port != listenPort {
		p.addf("%s: %s %q: a peer is dialled at its pod IP with port %d, but a replica listens on and advertises port %d", who, key, dns, port, listenPort)
	}
}

// envFromField reports whether env name of c comes from the pod field
// path (the downward API).
func envFromField(c corev1.Container, name, path string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == path
		}
	}
	return false
}

func groupOf(r *Render, d *appsv1.Deployment) (podGroup, bool) {
	for _, g := range r.podGroups() {
		if g.deployment == d {
			return g, true
		}
	}
	return podGroup{}, false
}

// mountedCertificates are the Certificates whose Secret d mounts.
func mountedCertificates(r *Render, d *appsv1.Deployment) []*Certificate {
	mounted := map[string]bool{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			mounted[v.Secret.SecretName] = true
		}
	}
	var out []*Certificate
	for _, c := range r.Certificates {
		if mounted[c.Spec.SecretName] {
			out = append(out, c)
		}
	}
	return out
}

// expectClientCertificate: a server that verifies client certificates
// accepts the one d mounts only if it may be used for client auth, and it
// names the credential cred by its URI SAN.
func (p *problems) expectClientCertificate(r *Render, who, key string, d *appsv1.Deployment, cred config.ServiceCredential) {
	certs := mountedCertificates(r, d)
	if len(certs) == 0 {
		p.addf("%s: %s: the server requires a client certificate, but no Certificate is mounted", who, key)
		return
	}
	for _, c := range certs {
		if len(c.Spec.Usages) > 0 && !slices.Contains(c.Spec.Usages, "client auth") {
			p.addf("%s: %s: Certificate %s lacks the usage \"client auth\", so the server refuses it as a client certificate", who, key, c.Metadata.Name)
		}
		if cred.URISAN != "" && !slices.Contains(c.Spec.URIs, cred.URISAN) {
			p.addf("%s: %s: Certificate %s does not carry the URI SAN %s of credential %s", who, key, c.Metadata.Name, cred.URISAN, cred.Name)
		}
	}
}

// admits reports whether the NetworkPolicies of the render let pods of
// from open connections to pods of to on container port port: no policy
// selects to for ingress, or a rule of one that does admits from. Peers
// are pods of the render's namespace (a namespaceSelector other than {}
// is outside what the render can tell).
func (r *Render) admits(from, to podGroup, port int32) bool {
	selected := false
	for _, np := range r.NetworkPolicies {
		if len(np.Spec.PolicyTypes) > 0 && !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(to.labels) {
			continue
		}
		selected = true
		for _, rule := range np.Spec.Ingress {
			if portAdmitted(rule.Ports, to, port) && peerAdmitted(rule.From, from) {
				return true
			}
		}
	}
	return !selected
}

func portAdmitted(ports []networkingv1.NetworkPolicyPort, to podGroup, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, pp := range ports {
		if pp.Port == nil {
			return true
		}
		if n, ok := to.portNumber(*pp.Port); ok && n == port {
			return true
		}
	}
	return false
}

func peerAdmitted(peers []networkingv1.NetworkPolicyPeer, from podGroup) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		if peer.PodSelector == nil || peer.IPBlock != nil {
			continue
		}
		if ns := peer.NamespaceSelector; ns != nil && (len(ns.MatchLabels) > 0 || len(ns.MatchExpressions) > 0) {
			continue
		}
		ps, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
		if err == nil && ps.Matches(from.labels) {
			return true
		}
	}
	return false
}
