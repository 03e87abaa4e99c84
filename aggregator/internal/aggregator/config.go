package aggregator

import (
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/authz"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// OptionsFromConfig translates the aggregator section of the deployment
// configuration. A bad conflict-resolution setting or a policy file that
// does not parse is an error.
func OptionsFromConfig(c config.Aggregator) (Options, error) {
	naming, err := catalog.NewNaming(c.ConflictResolution)
	if err != nil {
		return Options{}, err
	}
	az, err := authz.Load(c.Authz.PolicyFile)
	if err != nil {
		return Options{}, err
	}
	opts := Options{
		Naming:       naming,
		Authz:        az,
		PageSize:     c.PageSize,
		MaxPageSize:  c.MaxPageSize,
		CatalogTTL:   time.Duration(c.CatalogTTL),
		FanOut:       c.FanOut,
		Instructions: c.Instructions,
		Health: HealthOptions{
			Interval:           time.Duration(c.Health.Interval),
			Timeout:            time.Duration(c.Health.Timeout),
			DegradedThreshold:  time.Duration(c.Health.DegradedThreshold),
			UnhealthyThreshold: c.Health.UnhealthyThreshold,
		},
	}
	for _, b := range c.Backends {
		opts.Backends = append(opts.Backends, backend.Config{
			Name:      b.Name,
			URL:       b.URL,
			Protocol:  b.Protocol,
			Headers:   b.Headers,
			Timeout:   time.Duration(b.Timeout),
			InputWait: time.Duration(b.InputWait),
		})
	}
	return opts, nil
}
