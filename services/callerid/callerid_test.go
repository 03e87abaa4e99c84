package callerid

import (
	"encoding/base64"
	"strings"
	"testing"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

func jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(payload)) + ".c2ln"
}

func TestFromClaims(t *testing.T) {
	p := FromClaims(map[string]any{"sub": "alice", "groups": []any{"a", 7, "b"}}, "")
	if p.GetSubject() != "alice" || strings.Join(p.GetGroups(), ",") != "a,b" {
		t.Errorf("default claim: %v", p)
	}
	p = FromClaims(map[string]any{"sub": "alice", "roles": "ops", "groups": []any{"a"}}, "roles")
	if strings.Join(p.GetGroups(), ",") != "ops" {
		t.Errorf("configured claim holding one string: %v", p)
	}
	for _, claims := range []map[string]any{{}, {"sub": ""}, {"sub": 7}} {
		if p := FromClaims(claims, ""); p != nil {
			t.Errorf("%v: %v, want no principal", claims, p)
		}
	}
}

// A token is bound to the principal of its own claims, subject and groups
// (as sets), and to no other.
func TestBound(t *testing.T) {
	alice := jwt(`{"sub":"alice","groups":["eng","ops"]}`)
	for _, c := range []struct {
		token string
		p     *commonv1.Principal
		want  bool
	}{
		{alice, &commonv1.Principal{Subject: "alice", Groups: []string{"ops", "eng"}}, true},
		{alice, &commonv1.Principal{Subject: "alice", Groups: []string{"eng", "ops", "eng"}}, true},
		{alice, &commonv1.Principal{Subject: "bob", Groups: []string{"eng", "ops"}}, false},
		{alice, &commonv1.Principal{Subject: "alice", Groups: []string{"eng", "ops", "admins"}}, false},
		{alice, &commonv1.Principal{Subject: "alice", Groups: []string{"eng"}}, false},
		{alice, &commonv1.Principal{}, false},
		{alice, nil, false},
		{jwt(`{"sub":"alice"}`), &commonv1.Principal{Subject: "alice"}, true},
		{jwt(`{"groups":["eng"]}`), &commonv1.Principal{Groups: []string{"eng"}}, false},
		{"opaque", &commonv1.Principal{Subject: "alice"}, false},
		{"a.!!!.c", &commonv1.Principal{Subject: "alice"}, false},
		{jwt(`null`), &commonv1.Principal{}, false},
		{jwt(`{"sub":"alice","pad":"` + strings.Repeat("x", MaxToken) + `"}`), &commonv1.Principal{Subject: "alice"}, false},
	} {
		if got := Bound(c.token, c.p, ""); got != c.want {
			t.Errorf("%.60s as %v: %v, want %v", c.token, c.p, got, c.want)
		}
	}
}
