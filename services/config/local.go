package config

// A configuration for one machine names what it runs and little else: the
// services listen on loopback ports unless told otherwise, and a client
// endpoint left unset reaches that service with the token of the
// credential whose role is the client's (roles.go). Parse applies these
// defaults once, after the roles; an address or token that is set is
// kept, so a cluster's configuration, which names every endpoint, is read
// as written.

// The gRPC services' addresses when the file names none (the gateway's is
// DefaultGatewayListen, its section's default).
const (
	DefaultAggregatorListen = "127.0.0.1:9090"
	DefaultIndexerListen    = "127.0.0.1:9091"
)

// applyLocalDefaults fills the listen addresses and the endpoints a role
// makes plain.
func (c *Config) applyLocalDefaults() {
	c.Aggregator.Listen = orString(c.Aggregator.Listen, DefaultAggregatorListen)
	c.Indexer.Listen = orString(c.Indexer.Listen, DefaultIndexerListen)
	reach := func(ep *Endpoint, address, role string) {
		token := c.ServiceAuth.roleToken(role)
		if token == "" {
			return
		}
		if ep.Address == "" && ep.Token == "" {
			ep.Address, ep.Token = address, token
		}
	}
	reach(&c.Gateway.Aggregator, c.Aggregator.Listen, RoleGateway)
	reach(&c.Gateway.Indexer, c.Indexer.Listen, RoleGateway)
	reach(&c.Indexer.Aggregator, c.Aggregator.Listen, RoleIndexer)
	reach(&c.Aggregator.Indexer, c.Indexer.Listen, RoleAggregator)
	if c.Gateway.Console.Enabled && c.Gateway.Console.ServiceToken == "" {
		c.Gateway.Console.ServiceToken = c.ServiceAuth.roleToken(RoleConsole)
	}
}

// roleToken is the token of the one credential with role, "" when there is
// none, more than one, or it has only a digest.
func (a ServiceAuth) roleToken(role string) string {
	token, n := "", 0
	for _, cred := range a.Credentials {
		if cred.Role == role {
			token, n = cred.Token, n+1
		}
	}
	if n != 1 {
		return ""
	}
	return token
}

func orString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
