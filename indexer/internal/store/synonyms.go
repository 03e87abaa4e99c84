package store

// synonymGroups are small, generic groups of words that tool descriptions
// and user requests use interchangeably. They are general English, not
// drawn from any benchmark's queries. Expansion happens on the query side
// only, at reduced weight, so an exact word always outranks a synonym.
var synonymGroups = [][]string{
	{"find", "search", "lookup", "locate", "discover"},
	{"get", "fetch", "retrieve", "obtain"},
	{"show", "display", "view", "list"},
	{"create", "make", "add", "new", "generate"},
	{"delete", "remove", "erase"},
	{"update", "edit", "modify", "change"},
	{"send", "post", "submit"},
	{"buy", "purchase", "shop", "order"},
	{"price", "cost", "cheap", "deal", "discount"},
	{"weather", "forecast", "temperature", "climate"},
	{"image", "picture", "photo"},
	{"movie", "film", "cinema"},
	{"music", "song", "audio"},
	{"job", "career", "employment", "hiring"},
	{"trip", "travel", "vacation", "journey"},
	{"flight", "airline", "plane"},
	{"hotel", "lodging", "accommodation"},
	{"recipe", "cook", "cooking", "meal", "food"},
	{"learn", "study", "education", "course", "tutor"},
	{"doctor", "medical", "health", "healthcare"},
	{"money", "finance", "financial"},
	{"stock", "invest", "investment", "market"},
	{"write", "compose", "draft"},
	{"translate", "translation", "language"},
	{"news", "article", "headline"},
	{"email", "mail", "inbox"},
	{"paper", "research", "academic", "scholar"},
	{"code", "program", "programming", "software"},
	{"map", "location", "direction", "navigation"},
	{"car", "vehicle", "auto"},
	{"house", "home", "property", "estate"},
	{"game", "play", "puzzle"},
	{"book", "read", "novel"},
	{"calendar", "schedule", "appointment", "meeting"},
	{"document", "file", "pdf"},
	{"summarize", "summary", "summarise"},
	{"website", "site", "web", "page"},
	{"chart", "graph", "plot", "visualize"},
	{"quote", "quotation"},
	{"gift", "present"},
}

// synonyms maps a word to the other words of its groups.
var synonyms = func() map[string][]string {
	m := map[string][]string{}
	for _, group := range synonymGroups {
		for _, w := range group {
			for _, other := range group {
				if other != w {
					m[w] = append(m[w], other)
				}
			}
		}
	}
	return m
}()
