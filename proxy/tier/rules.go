package tier

// builtin holds the built-in rules per tier, for kinds of requests, in
// English and Russian. Complex rules are tried first, then medium, then
// medium; a message no rule takes goes to the similarity stage.
var builtin = map[Tier][]string{
	Complex: {
		// Asked for depth or rigour.
		`(?i)\b(in[- ]depth|deep (analysis|dive|research)|do a deep|thorough(ly)?|rigorous(ly)?|critically|systematic(ally)?|step[- ]by[- ]step (reason|plan)|think step by step|reason (carefully|step by step)|walk me through a rigorous)\b`,
		// Proofs, derivations, formal problems.
		`(?i)\b(prove|proof|derive|derivation|formulate|theorem)\b`,
		// Research and analysis as the task.
		`(?i)^\W*(research|investigate|audit)\b.{30,}`,
		`(?i)\b(literature review|research proposal|threat model|risk analysis|business plan|go-to-market|total cost of ownership|curriculum)\b`,
		`(?i)^\W*(analy[sz]e|assess|evaluate|model|develop a strategy|produce a detailed|compare)\b.{40,}`,
		// Designing systems, with their trade-offs.
		`(?i)^\W*(design|architect|plan)\b.{0,80}\b(architecture|system|service|schema|gateway|rate limiter|migration|database|indexing)\b`,
		`(?i)\btrade-?offs?\b.{0,40}\b(architecture|consistency|design|approach|model)`,
		`(?i)\b(architecture|consistency|design|approach|model)\b.{0,60}\btrade-?offs?\b`,
		`(?i)\b(migrat\w*)\b.{0,60}\b(zero downtime|without downtime|monolith)\b`,
		// Russian (RE2's \b knows only ASCII words: no \b here).
		`(?i)(подробн\p{L}* (анализ|исследу)|глубок\p{L}* анализ|проанализируй|исследуй|докажи|выведи формул|спроектируй|разработай (стратеги|подробн|бизнес)|стратеги\p{L}* выхода|модел\p{L}* угроз|бизнес-план|сравнительный анализ|шаг за шагом|рассуждай|оцени долгосрочн|обзор научных|проведи (глубокий|сравнительный|подробный))`,
		`(?i)миграц\p{L}*.{0,60}(без простоя|монолит)`,
		`(?i)^[^\p{L}]*(объясни подробно|подробно объясни|сравни)[^\p{L}].{40,}`,
	},
	Light: {
		// Greetings, thanks, goodbyes, short acknowledgements.
		`(?i)^\W*(hi|hello|hey|yo|hiya|good (morning|afternoon|evening|night)|thanks?|thank you|ok(ay)?|cool|nice( one)?|great|awesome|bye|goodbye|see you|yes( please)?|no( thanks)?|sure)\b[\w\s,!.?'’]{0,24}$`,
		`(?i)^[^\p{L}]*(привет|здравствуй\p{L}*|добр\p{L}+ (утро|день|вечер)|доброе утро|спасибо|благодарю|пока|до свидания|до завтра|спокойной ночи|ок|окей|понял\p{L}*|ясно|отлично|супер|как дела)([^\p{L}][\p{L}\s,!.?]{0,24})?[\s!.?]*$`,
		// A short factual question, a conversion, a spelling, a word.
		`(?i)^\W*(what|who|when|where|which|how (many|much|old|far|long|do you say)|is|are|does|did|spell|convert|round|define|give me a (synonym|antonym|word)|remind me what)\b[^\n]{0,50}$`,
		`(?i)^[^\p{L}]*(сколько|кто|когда|где|какой|какая|какое|какие|столица|переведи слово|что значит|что означает|как пишется|в каком году)[^\p{L}][^\n]{0,50}$`,
		// Bare arithmetic.
		`^[\s\d.,+\-*/×x÷^%()=?]+$`,
	},
	Medium: {
		// Everyday tasks: write, explain, summarise, translate, plan,
		// help, code a small thing.
		`(?i)^\W*(write|draft|rewrite|translate|summari[sz]e|explain|describe|help me|suggest|create|make|turn|list|tell me|show me|how (do|can|should) i|how does|why|what are (the )?(pros|good|best)|what should|what's the difference|what('s| is) wrong)\b`,
		`(?i)^[^\p{L}]*(напиши|составь|переведи (на|текст|этот|это)|объясни|перескажи|придумай|дай|помоги|как (правильно|настроить|приготовить|работает)|чем отличается|какие плюсы|сделай)[^\p{L}]`,
	},
}
