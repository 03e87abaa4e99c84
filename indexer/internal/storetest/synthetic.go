package storetest

import (
	"fmt"
	"math/rand/v2"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

var (
	services = []string{"github", "slack", "jira", "calendar", "drive", "weather", "stripe", "salesforce", "zendesk", "notion",
		"linear", "gmail", "postgres", "s3", "kubernetes", "datadog", "pagerduty", "hubspot", "figma", "spotify"}
	verbs = []string{"get", "list", "create", "update", "delete", "search", "send", "archive", "export", "import",
		"approve", "assign", "close", "open", "summarize", "schedule", "upload", "download", "sync", "validate"}
	nouns = []string{"issue", "message", "event", "file", "invoice", "customer", "ticket", "page", "user", "channel",
		"repository", "payment", "report", "alert", "incident", "contact", "deal", "comment", "playlist", "forecast",
		"bucket", "pod", "dashboard", "document", "meeting", "task", "project", "order", "subscription", "team"}
	adjectives = []string{"recent", "open", "archived", "shared", "private", "pending", "overdue", "daily", "monthly", "critical"}
)

// SyntheticTools returns n distinct tools with realistic names,
// descriptions and parameter schemas, deterministic for a seed.
func SyntheticTools(n int, seed uint64) []store.Tool {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	tools := make([]store.Tool, n)
	for i := range tools {
		svc, verb, noun := services[r.IntN(len(services))], verbs[r.IntN(len(verbs))], nouns[r.IntN(len(nouns))]
		adj, other := adjectives[r.IntN(len(adjectives))], nouns[r.IntN(len(nouns))]
		tools[i] = store.Tool{
			Name: fmt.Sprintf("%s_%s%s_%d", svc, verb, capitalize(noun), i),
			Description: fmt.Sprintf("%s %s %ss in %s, optionally filtered by %s. Returns the matching %s with its %s.",
				capitalize(verb), adj, noun, svc, other, noun, other),
			InputSchemaJSON: fmt.Sprintf(`{"type":"object","properties":{"%sId":{"type":"string","description":"Identifier of the %s"},"limit":{"type":"integer","description":"Maximum number of %ss to return"}},"required":["%sId"]}`,
				noun, noun, noun, noun),
		}
	}
	return tools
}

// SyntheticQuery returns a natural-language query over the synthetic
// vocabulary.
func SyntheticQuery(r *rand.Rand) string {
	return fmt.Sprintf("I need to %s the %s %ss from %s", verbs[r.IntN(len(verbs))], adjectives[r.IntN(len(adjectives))],
		nouns[r.IntN(len(nouns))], services[r.IntN(len(services))])
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
