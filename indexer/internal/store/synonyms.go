package store

import "slices"

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
var synonyms = expandGroups(synonymGroups)

// expandGroups maps each word to every other word of the groups it is in.
func expandGroups(groups [][]string) map[string][]string {
	m := map[string][]string{}
	for _, group := range groups {
		for _, w := range group {
			for _, other := range group {
				if other != w && !slices.Contains(m[w], other) {
					m[w] = append(m[w], other)
				}
			}
		}
	}
	return m
}

// topicGroups gather the everyday vocabulary of common subject areas, so a
// request that names a thing ("bitcoin", "humidity", "laptop") reaches a
// tool described by its field ("crypto prices", "weather", "products").
// Like synonymGroups they are general English written for this purpose;
// related words weigh less than synonyms.
var topicGroups = [][]string{
	{"weather", "forecast", "rain", "snow", "humidity", "temperature", "wind", "sunny", "storm", "climate", "celsius", "fahrenheit"},
	{"finance", "financial", "stock", "stocks", "share", "market", "invest", "investment", "portfolio", "dividend", "trading", "crypto", "cryptocurrency", "bitcoin", "ethereum", "coin", "forex", "currency", "exchange", "economy"},
	{"bank", "loan", "mortgage", "credit", "debt", "interest", "tax", "budget", "expense", "salary", "payment"},
	{"product", "shopping", "shop", "buy", "store", "retail", "brand", "laptop", "phone", "television", "tv", "clothes", "clothing", "shoes", "dress", "fashion", "electronics", "gadget", "deal", "discount", "coupon"},
	{"travel", "trip", "vacation", "holiday", "tour", "tourism", "destination", "hotel", "accommodation", "booking", "flight", "airport", "itinerary", "sightseeing", "attraction"},
	{"house", "home", "apartment", "property", "real", "estate", "rent", "rental", "lease", "landlord", "tenant", "mortgage", "buy", "sale", "neighborhood", "realtor"},
	{"job", "jobs", "career", "work", "employment", "hire", "hiring", "recruit", "resume", "cv", "interview", "salary", "position", "vacancy"},
	{"news", "headline", "article", "journalism", "report", "breaking", "latest", "event", "politics", "election"},
	{"music", "song", "songs", "album", "artist", "band", "playlist", "lyrics", "concert", "spotify", "listen"},
	{"video", "youtube", "movie", "film", "show", "series", "tv", "episode", "stream", "streaming", "netflix", "documentary", "watch", "cinema"},
	{"food", "recipe", "cook", "cooking", "meal", "dish", "ingredient", "cuisine", "restaurant", "dinner", "lunch", "breakfast", "diet", "nutrition", "calorie", "vegan"},
	{"health", "medical", "doctor", "symptom", "disease", "medicine", "hospital", "fitness", "exercise", "workout", "wellness", "mental", "therapy"},
	{"education", "learn", "learning", "course", "class", "lesson", "school", "university", "student", "teacher", "tutor", "study", "exam"},
	{"research", "paper", "papers", "academic", "scholar", "scholarly", "journal", "study", "citation", "literature", "science", "scientific", "arxiv", "thesis"},
	{"code", "coding", "program", "programming", "developer", "software", "github", "repository", "repo", "python", "javascript", "api", "bug", "debug"},
	{"language", "translate", "translation", "english", "spanish", "french", "german", "chinese", "japanese", "russian", "vocabulary", "grammar", "phrase", "word"},
	{"document", "pdf", "file", "text", "page", "summary", "summarize", "read", "website", "url", "link"},
	{"image", "photo", "picture", "drawing", "art", "design", "logo", "illustration", "graphic"},
	{"game", "games", "gaming", "play", "player", "puzzle", "quiz", "trivia"},
	{"sport", "sports", "football", "soccer", "basketball", "baseball", "tennis", "match", "team", "league", "score", "referee"},
	{"car", "cars", "vehicle", "auto", "automobile", "drive", "driving", "fuel", "petrol", "gas", "electric", "ev", "charging", "parking"},
	{"email", "mail", "inbox", "message", "contact", "send", "newsletter"},
	{"calendar", "schedule", "meeting", "appointment", "event", "reminder", "task", "todo", "plan"},
	{"seo", "keyword", "keywords", "ranking", "traffic", "backlink", "marketing", "advertising", "ads", "campaign", "audience", "content", "blog"},
	{"security", "password", "breach", "hack", "hacked", "privacy", "account", "vulnerability", "phishing"},
	{"law", "legal", "lawyer", "contract", "regulation", "court", "rights", "policy"},
	{"social", "twitter", "facebook", "instagram", "tiktok", "post", "follower", "influencer", "media"},
	{"map", "maps", "location", "address", "direction", "directions", "route", "navigation", "nearby", "place", "city"},
	{"gift", "gifts", "present", "birthday", "anniversary", "occasion"},
	{"pet", "pets", "dog", "cat", "animal", "veterinary"},
	{"plant", "plants", "garden", "gardening", "flower", "seed"},
}

// related maps a word to the other words of its topic groups.
var related = expandGroups(topicGroups)
