package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxKeyDepth is how deep Changed names keys: "gateway.http.maxBodyBytes",
// "aggregator.pinning.indexer.token" (a token is live where its address
// is not), and a map's entry at most one level below a section's key
// ("aggregator.conflictResolution.overrides.<backend>.<tool>"). Lists are
// named whole ("aggregator.backends").
const maxKeyDepth = 4

// Changed lists the keys whose values differ between two configurations,
// sorted, in the file's spelling ("gateway.auth.apiKeys"). It names keys
// only, never values, so it can be logged.
func Changed(old, new *Config) []string {
	a, b := generic(old), generic(new)
	var keys []string
	diff("", 0, a, b, &keys)
	if !urlsFromEnvironmentEqual(old, new) {
		// Not in the YAML (yaml:"-"), but what the aggregator redacts.
		keys = append(keys, "aggregator.backends")
	}
	sort.Strings(keys)
	return slices.Compact(keys)
}

// generic is cfg as YAML sees it: maps, lists and scalars, with the keys
// its yaml tags give (so defaults are not applied and omitted fields are
// absent).
func generic(cfg *Config) any {
	if cfg == nil {
		cfg = &Config{}
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		// Every field of Config marshals; keep the comparison meaningful
		// anyway (everything differs from an unmarshalable one).
		return fmt.Sprint(err)
	}
	var v any
	_ = yaml.Unmarshal(raw, &v)
	return v
}

func diff(path string, depth int, a, b any, keys *[]string) {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if aIsMap && bIsMap && depth < maxKeyDepth {
		names := map[string]bool{}
		for k := range am {
			names[k] = true
		}
		for k := range bm {
			names[k] = true
		}
		for k := range names {
			child := k
			if path != "" {
				child = path + "." + k
			}
			diff(child, depth+1, am[k], bm[k], keys)
		}
		return
	}
	if !reflect.DeepEqual(empty(a), empty(b)) {
		*keys = append(*keys, path)
	}
}

// empty maps the YAML spellings of "nothing" to nil, so that an absent
// section and an empty one compare equal.
func empty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			return nil
		}
	case []any:
		if len(x) == 0 {
			return nil
		}
	case string:
		if x == "" {
			return nil
		}
	}
	return v
}

// NeedRestart picks, out of the changed keys, those that a service reads
// (they are or lie under one of reads) but does not apply live (under
// none of live): a reload leaves them as they were at start, and the log
// says a restart is needed for them.
func NeedRestart(changed, reads, live []string) []string {
	var out []string
	for _, k := range changed {
		if underAny(k, reads) && !underAny(k, live) {
			out = append(out, k)
		}
	}
	return out
}

// ChangedUnder reports whether any changed key is or lies under one of
// prefixes, or is a parent of one (a whole section replaced).
func ChangedUnder(changed []string, prefixes ...string) bool {
	for _, k := range changed {
		if underAny(k, prefixes) {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(p, k+".") {
				return true
			}
		}
	}
	return false
}

func underAny(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if key == p || strings.HasPrefix(key, p+".") {
			return true
		}
	}
	return false
}

// urlsFromEnvironmentEqual reports whether the backends' URLs hold the
// same values from the environment in both configurations.
func urlsFromEnvironmentEqual(old, new *Config) bool {
	if old == nil || new == nil || len(old.Aggregator.Backends) != len(new.Aggregator.Backends) {
		return true // the YAML comparison sees these
	}
	for i, b := range old.Aggregator.Backends {
		if !slices.Equal(b.URLFromEnvironment, new.Aggregator.Backends[i].URLFromEnvironment) {
			return false
		}
	}
	return true
}
