package config

import (
	"errors"
	"strings"
	"testing"
)

func TestAdvertiseAddr(t *testing.T) {
	env := func(ip string) func(string) string {
		return func(k string) string {
			if k == PodIPEnv {
				return ip
			}
			return ""
		}
	}
	host := func() (string, error) { return "agg-0", nil }
	noHost := func() (string, error) { return "", errors.New("no name") }
	for _, c := range []struct {
		a    Aggregator
		ip   string
		host func() (string, error)
		want string
	}{
		{Aggregator{Listen: ":9090", AdvertiseAddress: "agg.example:9090"}, "10.0.0.5", host, "agg.example:9090"},
		{Aggregator{Listen: ":9090"}, "10.0.0.5", host, "10.0.0.5:9090"},
		{Aggregator{Listen: "0.0.0.0:9090"}, "fd00::5", host, "[fd00::5]:9090"},
		{Aggregator{Listen: "127.0.0.1:9090"}, "", host, "127.0.0.1:9090"},
		{Aggregator{Listen: "[::]:9090"}, "", host, "agg-0:9090"},
		{Aggregator{Listen: ":9090"}, "", host, "agg-0:9090"},
	} {
		got, err := c.a.AdvertiseAddr(env(c.ip), c.host)
		if err != nil || got != c.want {
			t.Errorf("%+v with POD_IP %q: %q, %v; want %q", c.a, c.ip, got, err, c.want)
		}
	}
	if _, err := (Aggregator{Listen: ":9090"}).AdvertiseAddr(env(""), noHost); err == nil {
		t.Error("no address and no host name: no error")
	}
	if _, err := (Aggregator{Listen: "nonsense"}).AdvertiseAddr(env(""), host); err == nil {
		t.Error("a listen address without a port: no error")
	}
}

func TestValidatePeers(t *testing.T) {
	for _, c := range []struct {
		a    Aggregator
		want string
	}{
		{Aggregator{}, ""},
		{Aggregator{Peers: AggregatorPeers{DNS: "agg-headless:9090", Token: "t"}}, ""},
		{Aggregator{Peers: AggregatorPeers{Addresses: []string{"10.0.0.1:9090"}, Token: "t"}}, ""},
		{Aggregator{Peers: AggregatorPeers{Addresses: []string{"10.0.0.1:9090"}}}, "peers.token is required"},
		{Aggregator{Peers: AggregatorPeers{DNS: "agg-headless", Token: "t"}}, "must be name:port"},
		{Aggregator{Peers: AggregatorPeers{Addresses: []string{"10.0.0.1"}, Token: "t"}}, "must be host:port"},
		{Aggregator{AdvertiseAddress: "x", Peers: AggregatorPeers{DNS: "a:1", Token: "t"}}, "advertiseAddress"},
	} {
		err := c.a.ValidatePeers()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.a, err, c.want)
		}
	}
}
