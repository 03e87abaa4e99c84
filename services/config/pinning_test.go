package config

import (
	"strings"
	"testing"
)

func TestPinningValidate(t *testing.T) {
	ok := Endpoint{Address: "dns:///indexer:50052", Token: "t"}
	for _, p := range []Pinning{{}, {Mode: "off"}, {Mode: "warn", Indexer: ok}, {Mode: "pin", Indexer: Endpoint{Address: "indexer:1", Token: "t"}}} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	if (Pinning{}).EffectiveMode() != PinningOff {
		t.Error("the default mode is not off")
	}
	for want, p := range map[string]Pinning{
		"want off, warn or pin":   {Mode: "strict", Indexer: ok},
		"indexer.address":         {Mode: "pin"},
		"indexer.token":           {Mode: "warn", Indexer: Endpoint{Address: "indexer:1"}},
		"pinning.indexer.address": {Mode: "pin", Indexer: Endpoint{Address: "dns://indexer", Token: "t"}},
	} {
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error naming %q", p, err, want)
		}
	}
}
