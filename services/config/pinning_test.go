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

func TestPinningNewTools(t *testing.T) {
	idx := Endpoint{Address: "idx:1", Token: "t"}
	for _, c := range []struct {
		p      Pinning
		review bool
		err    string
	}{
		{Pinning{Mode: PinningPin, Indexer: idx}, false, ""},
		{Pinning{Mode: PinningPin, Indexer: idx, NewTools: PinningNewToolsApprove}, false, ""},
		{Pinning{Mode: PinningPin, Indexer: idx, NewTools: PinningNewToolsReview}, true, ""},
		{Pinning{Mode: PinningPin, Indexer: idx, NewTools: "s3cr3t"}, false, "aggregator.pinning.newTools: want approve or review"},
	} {
		err := c.p.Validate()
		if (c.err == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "s3cr3t"))) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.err)
		}
		if c.p.ReviewNewTools() != c.review {
			t.Errorf("%+v: ReviewNewTools %v", c.p, c.p.ReviewNewTools())
		}
	}
}
