package validate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// The service tokens of a deployment, one per client→server pair
// (deploy/README.md, section 3). The deployer creates two Secrets with the
// same keys, named client-server ("gateway-aggregator"): the tokens, given
// to the client's pods only, and their SHA-256 digests in hex, given to
// the server's pods, which verify a caller by its digest
// (serviceAuth.credentials[].tokenSHA256) and so hold none of their
// callers' tokens.
const (
	ServiceTokensSecret      = "switchboard-service-tokens"
	ServiceTokenDigestSecret = "switchboard-service-token-digests"
)

// servicePairs are the keys of both Secrets: the client→server pairs.
var servicePairs = []string{
	"gateway-aggregator", "gateway-indexer",
	"console-aggregator", "console-indexer",
	"indexer-aggregator",
	"aggregator-aggregator", "aggregator-indexer",
	"internal-client-aggregator", "internal-client-indexer",
}

// secretPlaceholder is what envLookup gives for a key of a Secret: the
// value itself is unknown here, so the reference stands for it.
func secretPlaceholder(secret, key string) string { return "secret:" + secret + "/" + key }

// digestPlaceholder is what envLookup gives for a key of the digests
// Secret: the SHA-256, in hex, of what it gives for the same key of the
// tokens Secret, as the deployer computes it (deploy/README.md). So a
// server's tokenSHA256 matches a client's token exactly when both name
// the same pair.
func digestPlaceholder(key string) string {
	d := sha256.Sum256([]byte(secretPlaceholder(ServiceTokensSecret, key)))
	return hex.EncodeToString(d[:])
}

// namesToken reports whether credential c accepts token, compared as
// svcauth does: by the token's SHA-256.
func namesToken(c config.ServiceCredential, token string) bool {
	d, ok := c.TokenDigest()
	return ok && token != "" && d == sha256.Sum256([]byte(token))
}

// presentedToken is a token a service presents as a client.
type presentedToken struct {
	who, key, value string
	// pair is "client→server": two keys of one pair may hold one token.
	pair string
}

// presentedTokens lists the tokens a service presents, by the keys of
// the configuration that hold them.
func presentedTokens(comp, who string, cfg *config.Config) []presentedToken {
	var out []presentedToken
	add := func(key, value, pair string) {
		if value != "" {
			out = append(out, presentedToken{who: who, key: key, value: value, pair: pair})
		}
	}
	switch comp {
	case "gateway":
		g := cfg.Gateway
		add("gateway.aggregator.token", g.Aggregator.Token, "gateway→aggregator")
		add("gateway.indexer.token", g.Indexer.Token, "gateway→indexer")
		if g.Console.Enabled {
			key, token := g.Console.ServerToken("aggregator")
			add(key, token, "console→aggregator")
			key, token = g.Console.ServerToken("indexer")
			add(key, token, "console→indexer")
		}
	case "aggregator":
		a := cfg.Aggregator
		add("aggregator.peers.token", a.Peers.Token, "aggregator→aggregator")
		add("aggregator.pinning.indexer.token", a.Pinning.Indexer.Token, "aggregator→indexer")
		add("aggregator.indexer.token", a.Indexer.Token, "aggregator→indexer")
	case "indexer":
		add("indexer.aggregator.token", cfg.Indexer.Aggregator.Token, "indexer→aggregator")
	}
	return out
}

// checkTokensHeld: a Switchboard pod holds only the tokens its service
// presents. A server's pods verify their callers by digest: a caller's
// token in them (an env from the tokens Secret, or a credential's
// plaintext token) would let whoever takes a server pod over call the
// other server, or this one, as that caller.
func (p *problems) checkTokensHeld(d *appsv1.Deployment, c corev1.Container, comp string, cfg *config.Config, presented []presentedToken) {
	who := "Deployment " + d.Name
	own := map[string]bool{}
	for _, t := range presented {
		own[t.value] = true
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != ServiceTokensSecret {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if !own[secretPlaceholder(ref.Name, ref.Key)] {
			p.addf("%s: env %s holds token %s of Secret %s, which the %s does not present: a server verifies its callers by serviceAuth.credentials[].tokenSHA256 (Secret %s) and holds none of their tokens",
				who, e.Name, ref.Key, ref.Name, comp, ServiceTokenDigestSecret)
		}
	}
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil && ef.SecretRef.Name == ServiceTokensSecret {
			p.addf("%s: envFrom Secret %s gives the pod every service token: give it only those its service presents", who, ServiceTokensSecret)
		}
	}
	server := "switchboard." + comp + "."
	for i, cred := range cfg.ServiceAuth.Credentials {
		if cred.Token == "" || own[cred.Token] || !allowsService(cred, server) {
			continue
		}
		p.addf("%s: serviceAuth.credentials[%d] (%s).token: the %s verifies this caller by its token, so its pods hold the secret: give its SHA-256 as tokenSHA256 (Secret %s)",
			who, i, cred.Name, comp, ServiceTokenDigestSecret)
	}
}

// allowsService reports whether cred may call an RPC of the service
// whose full names start with prefix ("switchboard.aggregator.").
func allowsService(cred config.ServiceCredential, prefix string) bool {
	return slices.ContainsFunc(cred.Allow, func(a string) bool { return strings.HasPrefix(strings.TrimPrefix(a, "/"), prefix) })
}

// checkTokensPerPair: no two client→server pairs present one token, and
// no credential has one token on both servers, so a token a server (or a
// client of one server) holds opens nothing else.
func (p *problems) checkTokensPerPair(presented []presentedToken, agg, idx *config.Config) {
	first := map[string]presentedToken{}
	for _, t := range presented {
		f, seen := first[t.value]
		if !seen {
			first[t.value] = t
			continue
		}
		if f.pair != t.pair {
			p.addf("%s (%s) and %s (%s) present the same token: give each client→server pair a token of its own (%s, %s)", f.key, f.who, t.key, t.who, f.pair, t.pair)
		}
	}
	for _, a := range agg.ServiceAuth.Credentials {
		da, ok := a.TokenDigest()
		if !ok {
			continue
		}
		for _, i := range idx.ServiceAuth.Credentials {
			if di, ok := i.TokenDigest(); ok && i.Name == a.Name && di == da {
				p.addf("credential %s has the same token on the aggregator and the indexer: what one pair's client holds would open the other server; give each client→server pair a token of its own", a.Name)
			}
		}
	}
}

// credentialTokenKey names a credential's token in messages.
func credentialTokenKey(i int, cred config.ServiceCredential) string {
	return fmt.Sprintf("serviceAuth.credentials[%d] (%s).tokenSHA256", i, cred.Name)
}
