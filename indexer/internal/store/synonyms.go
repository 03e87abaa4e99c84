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
	{"weather", "forecast", "rain", "snow", "humidity", "temperature", "wind", "sunny", "storm", "climate", "celsius", "fahrenheit", "hurricane", "tornado", "drought", "heatwave", "frost", "thunderstorm", "meteorology"},
	{"finance", "financial", "stock", "stocks", "share", "market", "invest", "investment", "portfolio", "dividend", "trading", "crypto", "cryptocurrency", "bitcoin", "ethereum", "coin", "forex", "currency", "exchange", "economy", "nasdaq", "equity", "bond", "bonds", "etf", "fund", "funds", "wealth", "asset", "assets", "earnings", "ticker", "shares", "broker", "nft", "blockchain", "defi"},
	{"bank", "loan", "mortgage", "credit", "debt", "interest", "tax", "budget", "expense", "salary", "payment", "banking", "savings", "insurance", "refinance", "accounting", "invoice", "bill", "bills", "money", "cash", "income", "retirement", "pension"},
	{"product", "shopping", "shop", "buy", "store", "retail", "brand", "laptop", "phone", "television", "tv", "clothes", "clothing", "shoes", "dress", "fashion", "electronics", "gadget", "deal", "discount", "coupon", "appliance", "appliances", "kitchen", "blender", "toaster", "microwave", "furniture", "sofa", "toy", "toys", "camera", "headphones", "earbuds", "jewelry", "makeup", "cosmetics", "skincare", "perfume", "beauty", "purchase", "cheap", "affordable", "bargain", "amazon", "ecommerce", "sneakers", "handbag", "accessories", "computer", "tablet", "smartwatch"},
	{"travel", "trip", "vacation", "holiday", "tour", "tourism", "destination", "hotel", "accommodation", "booking", "flight", "airport", "itinerary", "sightseeing", "attraction", "airline", "airlines", "cruise", "resort", "beach", "camping", "hostel", "visa", "passport", "luggage", "backpacking", "excursion", "abroad"},
	{"house", "home", "apartment", "property", "real", "estate", "rent", "rental", "lease", "landlord", "tenant", "mortgage", "buy", "sale", "neighborhood", "realtor", "condo", "condos", "villa", "townhouse", "listing", "listings", "realty", "housing", "bedroom", "bedrooms", "roommate", "furnished", "homebuyer", "renovation", "interior", "decor"},
	{"job", "jobs", "career", "work", "employment", "hire", "hiring", "recruit", "resume", "cv", "interview", "salary", "position", "vacancy", "employer", "employee", "freelance", "freelancer", "internship", "gig", "workplace", "occupation", "profession", "applicant", "remote"},
	{"news", "headline", "article", "journalism", "report", "breaking", "latest", "event", "politics", "election", "press", "coverage", "story", "stories", "trending", "journalist", "newspaper", "magazine"},
	{"music", "song", "songs", "album", "artist", "band", "playlist", "lyrics", "concert", "spotify", "listen", "singer", "musician", "guitar", "piano", "melody", "genre", "rap", "jazz", "podcast", "podcasts", "radio", "audio"},
	{"video", "youtube", "movie", "film", "show", "series", "tv", "episode", "stream", "streaming", "netflix", "documentary", "watch", "cinema", "actor", "actress", "director", "trailer", "anime", "cartoon", "hulu", "disney", "youtuber", "vlog", "clip", "clips", "entertainment"},
	{"food", "recipe", "cook", "cooking", "meal", "dish", "ingredient", "cuisine", "restaurant", "dinner", "lunch", "breakfast", "diet", "nutrition", "calorie", "vegan", "pizza", "sushi", "pasta", "baking", "bake", "dessert", "snack", "drink", "drinks", "wine", "beer", "cocktail", "coffee", "tea", "bakery", "grocery", "groceries", "chef", "menu", "vegetarian", "keto", "protein"},
	{"health", "medical", "doctor", "symptom", "disease", "medicine", "hospital", "fitness", "exercise", "workout", "wellness", "mental", "therapy", "pharmacy", "drug", "drugs", "vitamin", "vitamins", "allergy", "sleep", "diabetes", "covid", "coronavirus", "pandemic", "vaccine", "virus", "illness", "pain", "diagnosis", "treatment", "clinic", "nurse", "dental", "dentist", "meditation", "yoga"},
	{"education", "learn", "learning", "course", "class", "lesson", "school", "university", "student", "teacher", "tutor", "study", "exam", "homework", "college", "degree", "tutorial", "tutorials", "training", "skill", "skills", "certificate", "curriculum", "math", "mathematics", "history", "physics", "chemistry", "biology"},
	{"research", "paper", "papers", "academic", "scholar", "scholarly", "journal", "study", "citation", "literature", "science", "scientific", "arxiv", "thesis", "experiment", "hypothesis", "preprint", "publication", "publications", "researcher", "pubmed", "dataset"},
	{"code", "coding", "program", "programming", "developer", "software", "github", "repository", "repo", "python", "javascript", "api", "bug", "debug", "database", "sql", "script", "compile", "framework", "algorithm", "java", "typescript", "rust", "golang", "devops", "deploy", "cloud", "server"},
	{"language", "translate", "translation", "english", "spanish", "french", "german", "chinese", "japanese", "russian", "vocabulary", "grammar", "phrase", "word", "dictionary", "definition", "meaning", "synonym", "pronunciation", "spelling", "linguistics", "italian", "korean", "portuguese", "arabic", "hindi"},
	{"document", "pdf", "file", "text", "page", "summary", "summarize", "read", "website", "url", "link", "docx", "spreadsheet", "excel", "csv", "ocr", "scan", "essay", "notes", "writing", "proofread"},
	{"image", "photo", "picture", "drawing", "art", "design", "logo", "illustration", "graphic", "photography", "painting", "sketch", "draw", "wallpaper", "meme", "memes", "gif", "icon", "icons", "avatar", "portrait"},
	{"game", "games", "gaming", "play", "player", "puzzle", "quiz", "trivia", "chess", "sudoku", "crossword", "riddle", "videogame", "videogames", "xbox", "playstation", "nintendo", "steam", "esports"},
	{"sport", "sports", "football", "soccer", "basketball", "baseball", "tennis", "match", "team", "league", "score", "referee", "nba", "nfl", "fifa", "olympics", "athlete", "cricket", "golf", "hockey", "rugby", "boxing", "racing", "marathon", "cycling", "fixture", "fixtures", "standings"},
	{"car", "cars", "vehicle", "auto", "automobile", "drive", "driving", "fuel", "petrol", "gas", "electric", "ev", "charging", "parking", "truck", "suv", "motorcycle", "dealer", "dealership", "mileage", "engine", "tesla", "rideshare", "taxi"},
	{"email", "mail", "inbox", "message", "contact", "send", "newsletter", "gmail", "outlook", "reply", "spam", "compose", "mailbox"},
	{"calendar", "schedule", "meeting", "appointment", "event", "reminder", "task", "todo", "plan", "deadline", "agenda", "availability", "timetable", "planner", "organize", "productivity"},
	{"seo", "keyword", "keywords", "ranking", "traffic", "backlink", "marketing", "advertising", "ads", "campaign", "audience", "content", "blog", "analytics", "serp", "optimization", "conversion", "promotion", "copywriting"},
	{"security", "password", "breach", "hack", "hacked", "privacy", "account", "vulnerability", "phishing", "malware", "antivirus", "encryption", "vpn", "scam", "fraud", "identity", "cyber", "cybersecurity", "firewall"},
	{"law", "legal", "lawyer", "contract", "regulation", "court", "rights", "policy", "attorney", "lawsuit", "litigation", "legislation", "statute", "compliance", "immigration", "patent", "trademark", "copyright", "divorce"},
	{"social", "twitter", "facebook", "instagram", "tiktok", "post", "follower", "influencer", "media", "reddit", "hashtag", "viral", "followers", "community", "forum"},
	{"map", "maps", "location", "address", "direction", "directions", "route", "navigation", "nearby", "place", "city", "distance", "nearest", "local", "area", "region", "gps", "town", "street"},
	{"gift", "gifts", "present", "birthday", "anniversary", "occasion", "wedding", "christmas", "valentine", "celebration", "party", "surprise"},
	{"pet", "pets", "dog", "cat", "animal", "veterinary", "puppy", "kitten", "breed", "vet", "adopt", "adoption", "shelter", "bird", "fish", "horse"},
	{"plant", "plants", "garden", "gardening", "flower", "seed", "tree", "trees", "lawn", "landscaping", "houseplant", "succulent", "vegetable", "vegetables", "compost", "soil"},
	{"space", "astronomy", "planet", "planets", "star", "stars", "galaxy", "nasa", "telescope", "moon", "mars", "rocket", "satellite", "universe", "cosmos", "solar"},
	{"book", "books", "novel", "novels", "author", "reading", "ebook", "audiobook", "poem", "poetry", "bookstore"},
	{"math", "calculate", "calculator", "calculation", "equation", "formula", "convert", "conversion", "unit", "units", "arithmetic"},
	{"event", "events", "ticket", "tickets", "festival", "venue", "conference", "concert", "show"},
}

// related maps a word to the other words of its topic groups.
var related = expandGroups(topicGroups)
