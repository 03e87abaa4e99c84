package validate

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// switchboardServices are the components that read switchboard.yaml.
var switchboardServices = []string{"gateway", "aggregator", "indexer"}

func hostPort(addr string) (string, int32, error) {
	h, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseInt(ps, 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", ps, err)
	}
	return h, int32(n), nil
}

// resolve follows host:port through a Service of the render to the pods
// behind it, and returns them with the container port the traffic reaches.
func (r *Render) resolve(addr string) (podGroup, int32, error) {
	host, port, err := hostPort(addr)
	if err != nil {
		return podGroup{}, 0, err
	}
	svc := r.service(host)
	if svc == nil {
		return podGroup{}, 0, fmt.Errorf("no Service %q in the render", host)
	}
	return r.serviceTarget(svc, port)
}

// serviceTarget is resolve's second half: the pods behind svc and the
// container port its port reaches.
func (r *Render) serviceTarget(svc *corev1.Service, port int32) (podGroup, int32, error) {
	host := svc.Name
	var target *intstr.IntOrString
	for _, sp := range svc.Spec.Ports {
		if sp.Port == port {
			target = &sp.TargetPort
		}
	}
	if target == nil {
		return podGroup{}, 0, fmt.Errorf("Service %s has no port %d", host, port)
	}
	for _, g := range r.podGroups() {
		if g.deployment == nil || len(svc.Spec.Selector) == 0 || !labelsMatch(svc.Spec.Selector, g.labels) {
			continue
		}
		n, ok := g.portNumber(*target)
		if !ok {
			return podGroup{}, 0, fmt.Errorf("Service %s port %d targets %s, which %s lacks", host, port, target.String(), g.name)
		}
		return g, n, nil
	}
	return podGroup{}, 0, fmt.Errorf("Service %s selects no Deployment", host)
}

func labelsMatch(sel map[string]string, set map[string]string) bool {
	for k, v := range sel {
		if set[k] != v {
			return false
		}
	}
	return true
}

// expectEndpoint checks that addr reaches the wanted component on the
// container port the component listens on.
func (p *problems) expectEndpoint(r *Render, who, key, addr, want string, wantPort int32) {
	g, port, err := r.resolve(addr)
	if err != nil {
		p.addf("%s: %s %q: %v", who, key, addr, err)
		return
	}
	p.expectComponent(who, key, addr, g, port, want, wantPort)
}

// expectComponent checks that the pods g reached at port are the wanted
// component listening on wantPort.
func (p *problems) expectComponent(who, key, addr string, g podGroup, port int32, want string, wantPort int32) {
	if got := component(g.deployment); got != want {
		p.addf("%s: %s %q reaches %s, not the %s", who, key, addr, got, want)
	}
	if wantPort != 0 && port != wantPort {
		p.addf("%s: %s %q reaches container port %d, but the %s listens on %d", who, key, addr, port, want, wantPort)
	}
}

func (p *problems) expectListen(who, key, addr string, c corev1.Container, portName string) int32 {
	_, port, err := hostPort(addr)
	if err != nil {
		p.addf("%s: %s %q: %v", who, key, addr, err)
		return 0
	}
	for _, cp := range c.Ports {
		if cp.Name == portName {
			if cp.ContainerPort != port {
				p.addf("%s: %s is %q but container port %s is %d", who, key, addr, portName, cp.ContainerPort)
			}
			return port
		}
	}
	p.addf("%s: %s is %q but the container has no port named %s", who, key, addr, portName)
	return port
}

// expectOptionalListen is expectListen for an address that may be unset,
// in which case the container must not declare the port either.
func (p *problems) expectOptionalListen(who, key, addr string, c corev1.Container, portName string) {
	if addr != "" {
		p.expectListen(who, key, addr, c, portName)
		return
	}
	for _, cp := range c.Ports {
		if cp.Name == portName {
			p.addf("%s: container port %s is declared but %s is empty, so nothing listens on it", who, portName, key)
		}
	}
}

func (p *problems) expectSet(who, key, value string) {
	if value == "" {
		p.addf("%s: %s is empty: the pod lacks the secret it references", who, key)
	}
}

// checkSwitchboardConfig parses the configuration file each Switchboard
// service mounts, with the environment its pod provides, using
// services/config itself, and checks it against the manifests.
func checkSwitchboardConfig(p *problems, r *Render) {
	byComponent := loadServiceConfigs(p, r)
	if len(byComponent) != len(switchboardServices) {
		return
	}
	gw, agg, idx := byComponent["gateway"], byComponent["aggregator"], byComponent["indexer"]

	// Each service's own listen addresses match its container ports.
	p.expectListen("Deployment "+gw.d.Name, "gateway.listen", gw.cfg.Gateway.Listen, gw.c, "http")
	p.expectOptionalListen("Deployment "+gw.d.Name, "gateway.opsListen", gw.cfg.Gateway.OpsListen, gw.c, "ops")
	aggPort := p.expectListen("Deployment "+agg.d.Name, "aggregator.listen", agg.cfg.Aggregator.Listen, agg.c, "grpc")
	p.expectOptionalListen("Deployment "+agg.d.Name, "aggregator.httpListen", agg.cfg.Aggregator.HTTPListen, agg.c, "http")
	idxPort := p.expectListen("Deployment "+idx.d.Name, "indexer.listen", idx.cfg.Indexer.Listen, idx.c, "grpc")
	p.expectOptionalListen("Deployment "+idx.d.Name, "indexer.httpListen", idx.cfg.Indexer.HTTPListen, idx.c, "http")

	// Each service reaches the others through their Services.
	gwWho := "Deployment " + gw.d.Name
	p.expectBalancedEndpoint(r, gwWho, "gateway.aggregator.address", gw.cfg.Gateway.Aggregator.Address, "aggregator", aggPort, gw.cfg.ServiceAuth.TLS)
	p.expectBalancedEndpoint(r, gwWho, "gateway.indexer.address", gw.cfg.Gateway.Indexer.Address, "indexer", idxPort, gw.cfg.ServiceAuth.TLS)
	idxWho := "Deployment " + idx.d.Name
	p.expectBalancedEndpoint(r, idxWho, "indexer.aggregator.address", idx.cfg.Indexer.Aggregator.Address, "aggregator", aggPort, idx.cfg.ServiceAuth.TLS)
	aggWho := "Deployment " + agg.d.Name
	pinning := agg.cfg.Aggregator.Pinning
	pinned := pinning.EffectiveMode() != config.PinningOff
	if err := pinning.Validate(); err != nil {
		p.addf("%s: %v", aggWho, err)
	}
	if pinned {
		// The aggregator dials the indexer by its Service's name, not
		// the peers' serverName.
		tls := agg.cfg.ServiceAuth.TLS
		tls.ServerName = ""
		p.expectBalancedEndpoint(r, aggWho, "aggregator.pinning.indexer.address", pinning.Indexer.Address, "indexer", idxPort, tls)
		p.expectSet(aggWho, "aggregator.pinning.indexer.token", pinning.Indexer.Token)
	}
	for _, c := range []loadedConfig{gw, agg, idx} {
		if err := c.cfg.GRPC.Validate(); err != nil {
			p.addf("Deployment %s: %v", c.d.Name, err)
		}
	}

	// Each pod receives the secrets its own service uses.
	p.expectSet(gwWho, "gateway.aggregator.token", gw.cfg.Gateway.Aggregator.Token)
	p.expectSet(gwWho, "gateway.indexer.token", gw.cfg.Gateway.Indexer.Token)
	if gw.cfg.Gateway.Auth.Mode == "apiKeys" {
		for i, k := range gw.cfg.Gateway.Auth.APIKeys {
			p.expectSet(gwWho, fmt.Sprintf("gateway.auth.apiKeys[%d].key", i), k.Key)
		}
	}
	if maxReplicas(r, gw.d.Name) > 1 {
		// Without a shared key each replica seals Legacy sessions with its
		// own random key and the others reject them.
		p.expectSet(gwWho, "gateway.sessions.key (shared by all replicas)", gw.cfg.Gateway.Sessions.Key)
	}
	p.expectSet(idxWho, "indexer.database", idx.cfg.Indexer.Database)
	p.expectSet(idxWho, "indexer.aggregator.token", idx.cfg.Indexer.Aggregator.Token)
	// A server verifies the token of every credential that may call one
	// of its RPCs, by its digest (or, with no certificate identity, by
	// nothing); one that allows only the other server's (the indexer's
	// own, seen by the indexer) needs no secret there.
	for _, server := range []struct {
		loadedConfig
		service string
	}{{agg, "switchboard.aggregator."}, {idx, "switchboard.indexer."}} {
		for i, cred := range server.cfg.ServiceAuth.Credentials {
			if !allowsService(cred, server.service) {
				continue
			}
			if _, ok := cred.TokenDigest(); !ok {
				p.expectSet("Deployment "+server.d.Name, credentialTokenKey(i, cred), "")
			}
		}
	}
	// Each pod holds only the tokens its service presents, and each
	// client→server pair has a token of its own.
	var presented []presentedToken
	for _, l := range []struct {
		loadedConfig
		comp string
	}{{gw, "gateway"}, {agg, "aggregator"}, {idx, "indexer"}} {
		own := presentedTokens(l.comp, "Deployment "+l.d.Name, l.cfg)
		p.checkTokensHeld(l.d, l.c, l.comp, l.cfg, own)
		presented = append(presented, own...)
	}
	p.checkTokensPerPair(presented, agg.cfg, idx.cfg)
	// The aggregator replicas reach each other for held calls.
	p.checkAggregatorPeers(r, agg.d, agg.c, agg.cfg, aggPort)
	// The files the configuration names are in the pod.
	if f := agg.cfg.Aggregator.Authz.PolicyFile; f != "" {
		p.expectMountedFile(r, agg.d, agg.c, "aggregator.authz.policyFile", f)
	}
	// The NetworkPolicies let each client reach the servers it calls.
	for _, link := range []struct {
		from, to loadedConfig
		port     int32
	}{{gw, agg, aggPort}, {gw, idx, idxPort}, {idx, agg, aggPort}, {agg, idx, idxPort}} {
		if link.from.d == agg.d && !pinned {
			continue
		}
		from, okFrom := groupOf(r, link.from.d)
		to, okTo := groupOf(r, link.to.d)
		if okFrom && okTo && !r.admits(from, to, link.port) {
			p.addf("Deployment %s: no NetworkPolicy rule admits its pods to those of Deployment %s on port %d, which it calls", link.from.d.Name, link.to.d.Name, link.port)
		}
	}
	// The tokens the clients present are among those the servers accept,
	// and their credentials allow the RPCs the clients call: the gateway's
	// config.GatewayMethods, the indexer's config.IndexerMethods and never
	// a call.
	for _, t := range []struct {
		who, key, token, server string
		creds                   []config.ServiceCredential
		needs                   []string
	}{
		{gwWho, "gateway.aggregator.token", gw.cfg.Gateway.Aggregator.Token, "aggregator", agg.cfg.ServiceAuth.Credentials, config.GatewayMethods},
		{idxWho, "indexer.aggregator.token", idx.cfg.Indexer.Aggregator.Token, "aggregator", agg.cfg.ServiceAuth.Credentials, config.IndexerMethods},
		{gwWho, "gateway.indexer.token", gw.cfg.Gateway.Indexer.Token, "indexer", idx.cfg.ServiceAuth.Credentials, config.GatewayMethods},
		{aggWho, "aggregator.pinning.indexer.token", pinning.Indexer.Token, "indexer", idx.cfg.ServiceAuth.Credentials, config.AggregatorMethods},
	} {
		if t.key == "aggregator.pinning.indexer.token" && !pinned {
			continue
		}
		i := slices.IndexFunc(t.creds, func(c config.ServiceCredential) bool { return namesToken(c, t.token) && c.AssertPrincipals })
		if i < 0 {
			p.addf("%s: %s is not a principal-asserting credential of the %s", t.who, t.key, t.server)
			continue
		}
		allowed := config.NewMethodSet(t.creds[i].Allow)
		for _, m := range t.needs {
			if strings.HasPrefix(m, "switchboard."+t.server+".") && !allowed.Permits("/"+m) {
				p.addf("%s: the %s's credential for %s does not allow %s, which it calls", t.who, t.server, t.key, m)
			}
		}
		if t.key == "indexer.aggregator.token" {
			for _, m := range []string{"CallTool", "CallToolStream", "ReadResource", "GetPrompt", "Complete"} {
				if allowed.Permits("/switchboard.aggregator.v1.AggregatorService/" + m) {
					p.addf("%s: the credential for %s allows %s: the indexer reads views and never calls", t.who, t.key, m)
				}
			}
		}
	}
	// The operator console's token names, on both servers, an operator
	// credential that may assert principals and allows exactly the read
	// RPCs the console calls of that server (config.ConsoleMethods):
	// anything more would let a console session call tools.
	if console := gw.cfg.Gateway.Console; console.Enabled {
		for _, srv := range []struct {
			name  string
			creds []config.ServiceCredential
		}{{"aggregator", agg.cfg.ServiceAuth.Credentials}, {"indexer", idx.cfg.ServiceAuth.Credentials}} {
			key, token := console.ServerToken(srv.name)
			i := slices.IndexFunc(srv.creds, func(c config.ServiceCredential) bool { return namesToken(c, token) })
			if i < 0 {
				p.addf("%s: %s is not a credential of the %s", gwWho, key, srv.name)
				continue
			}
			cred := srv.creds[i]
			var want []string
			for _, m := range config.ConsoleMethods {
				if strings.HasPrefix(m, "switchboard."+srv.name+".") {
					want = append(want, m)
				}
			}
			var got []string
			for _, m := range cred.Allow {
				if strings.HasPrefix(m, "switchboard."+srv.name+".") {
					got = append(got, m)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !cred.Operator || !cred.AssertPrincipals || !slices.Equal(got, want) {
				p.addf("%s: the %s's credential %s for %s must be operator and assertPrincipals and allow exactly %v of it (config.ConsoleMethods); it allows %v", gwWho, srv.name, cred.Name, key, want, got)
			}
		}
	}
	// Backends inside the cluster are named by their Service.
	for _, b := range agg.cfg.Aggregator.Backends {
		if len(b.Command) > 0 {
			// A stdio server runs in the aggregator's pod: its
			// program must be in the aggregator's image.
			continue
		}
		host := hostOfURL(b.URL)
		if host == "" {
			p.addf("Deployment %s: backend %s has no host in %q", agg.d.Name, b.Name, b.URL)
			continue
		}
		if !strings.Contains(host, ".") {
			if _, _, err := r.resolve(host); err != nil {
				p.addf("Deployment %s: backend %s %q: %v", agg.d.Name, b.Name, b.URL, err)
			}
		}
	}
}

func hostOfURL(u string) string {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		rest, ok = strings.CutPrefix(u, "https://")
	}
	if !ok {
		return ""
	}
	host, _, _ := strings.Cut(rest, "/")
	if !strings.Contains(host, ":") {
		if strings.HasPrefix(u, "https://") {
			return host + ":443"
		}
		return host + ":80"
	}
	return host
}

func maxReplicas(r *Render, deployment string) int32 {
	for _, h := range r.HPAs {
		if h.Spec.ScaleTargetRef.Name == deployment {
			return h.Spec.MaxReplicas
		}
	}
	if d := r.deployment(deployment); d != nil && d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
