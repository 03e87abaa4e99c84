package console

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// OIDCLogin logs operators in through the OpenID provider's
// authorization-code flow.
type OIDCLogin struct{}

func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	if c.deps.OIDC == nil {
		http.NotFound(w, r)
		return
	}
	http.NotFound(w, r)
}

func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if c.deps.OIDC == nil {
		http.NotFound(w, r)
		return
	}
	http.NotFound(w, r)
}

// NewOIDCLogin is not done yet.
func NewOIDCLogin(cfg config.ConsoleOIDC, provider config.OIDC, client *http.Client) (*OIDCLogin, error) {
	return &OIDCLogin{}, nil
}
