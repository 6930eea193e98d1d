"""Signal specs of the injection heuristic beyond the core English ones: instructions planted in
documents and tool results, override / persona / exfiltration phrasing in other languages,
encoded payloads asked to be obeyed, markup around injected text and what a planted
instruction asks of every answer. Same format as injection_patterns.WORD_SPECS, which
appends them in this order (at one position the first spec wins)."""

from __future__ import annotations

from .injection_vocab import (
    A, ABIDE, ANSWERS, COPULA, DESTRUCTIVE, FOLLOW, G, LIMITS_ML, NOTHING_ELSE, NOW_YOU, N_OVR,
    Q_ADJ, Q_POSS, S, SENSITIVE, SENSITIVE_ML, SYS_INSTR_ML, TOOLS, UNBOUND_ML, URLISH, USERS,
    WITHOUT_ML,
)

# First words whose specs (all "verbatim") are tried even inside another signal's match:
# "include verbatim in your reply", "mention it in your answer exactly as written".
OVERLAPPING = frozenset("verbatim textuellement wortwortlich wortlich woertlich exactly exactement exactamente "
                        "exatamente esattamente exact saktesisht direach".split())

# (name, words a match starts with, the rest)
DOCUMENT_SPECS: list[tuple[str, str, str]] = [
    # instructions embedded in documents and tool results
    ("destructive_tool", "call invoke use run execute trigger calling invoking", rf"\s+(?:the\s+)?(?:tool\s+|function\s+)?"
     rf"{DESTRUCTIVE}_[a-z_]{{2,40}}\b"),
    ("tool_exfil", "call invoke use run execute trigger calling invoking", r"\s+(?:the\s+)?(?:tool\s+|function\s+)?"
     r"[a-z]{2,20}_[a-z_]{2,40}\b[^\n]{0,40}?(?:https?:|www\.)"),
    ("tool_call", "call invoke use run execute trigger calling invoking", r"\s+(?:the\s+)?(?:tool\s+|function\s+)?"
     r"[a-z]{2,20}_[a-z_]{2,40}\b"),
    ("destructive_tool", "function tool", rf"\s+call\s*:\s*{DESTRUCTIVE}_[a-z_]{{2,40}}\s*\("),
    ("override", "regardless irrespective", rf"\s+of{G(3)}(?:{A(Q_ADJ)}|{A(Q_POSS)})\b{G(2)}{N_OVR}\b"),
    ("regardless_user", "regardless irrespective", r"\s+of\s+(?:what|whatever)\s+(?:the\s+)?(?:user|customer|human|"
     r"question)\s+(?:asks|says|wants|requests|is)\b|\s+of\s+(?:the\s+)?(?:topic|question|user's\s+(?:question|"
     r"request))\b"),
    ("task_cancelled", "previous prior original current earlier", r"\s+(?:\w{1,20}\s+)?(?:task|request|"
     r"question|instructions?|assignment|guidance|rules)\s+(?:is|are|was|were|has\s+been|have\s+been)\s+(?:now\s+)?"
     r"(?:cancelled|canceled|void|obsolete|superseded|revoked|invalid|no\s+longer\s+valid)\b"),
    ("safety_off", "disable deactivate bypass circumvent remove lift turn switch drop", r"(?:\s+off)?\s+(?:the\s+)?"
     r"(?:safety|ethical|moral|content)\s+(?:filters?|guidelines|guardrails|checks|restrictions|polic\w*)"),
    ("new_instructions", "new urgent important", r"(?:\s+(?:important|urgent|new|priority))*\s+(?:instructions?|task|"
     r"directives?|orders)\b[ \t]*(?:\*|:|!)"),
    ("new_instructions", "neue nuevas nouvelles nuove novas nuevo nouveau", r"\s+(?:\w{1,20}\s+)?(?:anweisungen|"
     r"instrucciones|instructions|consignes|istruzioni|instrucoes|aufgabe|tarea|tache|compito|tarefa)\b[ \t]*:"),
    ("from_now_on", "from", r"\s+now\s+on\b(?=[^\w\n]{1,4}(?:always|never|only|respond|reply|answer)\b)"),
    ("from_now_on", "sofort desormais dorenavant poi partir", rf"(?:\s+de\s+(?:ahora|maintenant|agora))?{NOW_YOU}"),
    # persona, de fr es it pt
    ("persona_ml", COPULA, rf"(?:\s+\w{{1,20}}){{0,4}}?\s+{WITHOUT_ML}\s+(?:\w{{1,20}}\s+)?{LIMITS_ML}"),
    ("persona_ml", COPULA, rf"(?:\s+\w{{1,20}}){{0,2}}?\s+{UNBOUND_ML}"),
    ("dev_mode", "modo mode modalita modus", r"\s+(?:de\s+)?(?:desarrollador|developpeur|sviluppatore|"
     r"desenvolvedor|entwickler|dios|dieu|admin|administrador|administrateur|sin\s+restricciones|sans\s+restrictions)\b"),
    ("dev_mode", "entwicklermodus developermodus", r"\b"),
    ("dev_mode", "you", r"(?:\s+are|'re)\s+(?:now\s+)?(?:in|operating\s+in|running\s+in)\s+(?:test|testing|"
     r"diagnostic|debugging)\s+mode\b"),
    ("without_limits", "sin sans ohne senza sem without", rf"\s+(?:any\s+|ninguna\s+|aucune\s+|jegliche\s+|alcuna\s+)?"
     rf"(?:\w{{1,20}}\s+)?{LIMITS_ML}"),
    ("amoral_persona", "you", r"(?:\s+are|'re)\s+(?:now\s+)?(?:an?\s+)?(?:evil|malicious|unrestrained|no[\s-]+limits?)\b"),
    ("amoral_persona", "without", r"\s+(?:any\s+)?regard\s+(?:for|to)\s+(?:legality|ethics|morals|morality|safety|"
     r"rules|the\s+law|consequences|harm)\b"),
    ("no_content_policy", "no without zero", r"\s+(?:any\s+)?(?:content|safety|ethical|moral)\s+(?:restrictions|"
     r"filters?|filtering|polic\w*|guidelines|rules|limits|constraints|boundaries|limitations|guardrails)\b"),
    ("no_longer_bound", "no none", r"\s+(?:of\s+the\s+|of\s+your\s+)?(?:rules|restrictions|guidelines|limits)\s+"
     r"(?:apply|applies|exist)\b"),
    ("no_content_policy", "mode", r"\s+(?:has|with)\s+no\s+(?:restrictions|limits|filters|rules)\b"),
    ("never_refuse", "without no", r"\s+(?:any\s+)?(?:\w{1,20}\s+or\s+)?refusals?\b"),
    ("no_disclaimers", "without no", r"\s+(?:any\s+)?(?:\w{1,20}\s+or\s+)?(?:filters?|filtering)\b"),
    # well-known persona names and claims of the DAN family
    ("dan", "you act known roleplay play become called named stay remain", r"(?:\s+are|'re)?(?:\s+now)?(?:\s+as)?\s+"
     r"(?:a\s+|an\s+)?[\"']?(?:stan|dude|betterdan|antidan|anti-dan|evilbot|jailbreakgpt|basedgpt|apophis|alphabreak|"
     r"ucar|nraf|aim)\b[\"']?(?=[^\w\n]{1,4}(?:which|who|that|an?|the|is|stands|,|\.))"),
    ("amoral_persona", "evil trusted", r"\s+(?:trusted\s+)?confidant\b"),
    ("amoral_persona", "machiavellian", r"\b"),
    ("unbound_claim", "can could will", r"\s+(?:do|say|generate|perform|answer|write)\s+anything\b(?:\s+and\s+everything)?"),
    ("unbound_claim", "doesn't dont don't never", r"\s+cares?\s+(?:about|for)\s+(?:ethics|laws?|rules|morals?|morality|"
     r"safety|legality|consequences|guidelines|policies)\b"),
    ("unbound_claim", "does do", r"\s+not\s+care\s+(?:about|for)\s+(?:ethics|laws?|rules|morals?|morality|safety|legality|"
     r"consequences|guidelines|policies)\b"),
    # persona claims: freed of the provider's policy, never apologising
    ("never_refuse", "never", r"\s+(?:say|respond\s+with|reply\s+with|include|write|tell\s+me)\s+[\"']?(?:that\s+)?(?:i'?m\s+"
     r"sorry|i\s+apologi[sz]e|as\s+an\s+ai|i\s+cannot|i\s+can't|(?:you|he|she|it)\s+can'?t|(?:you|he|she|it)\s+cannot)"),
    ("no_longer_bound", "you dan ai assistant model chatbot gpt chatgpt", r"(?:\s+\w{1,20})?\s+(?:does\s+not|doesn't|do\s+not|"
     r"don't|will\s+not|won't|never|no\s+longer|not)\s+(?:have\s+to\s+|need\s+to\s+)?" + ABIDE + r"\w*\s+"
     r"(?:by\s+|with\s+|to\s+)?(?:any\s+|the\s+|their\s+|its\s+|your\s+)?(?:content\s+polic\w*|openai'?s?\s+"
     r"(?:rules|polic\w*|guidelines)|(?:ethical|moral|safety)\s+guidelines|rules\s+set\s+for\s+them|rules|restrictions)"),
    # exfiltration and reveal, de fr es it pt
    ("reveal_prompt", "revela revelame muestra muestrame dime rivela rivelami mostra mostrami dimmi revele montre "
     "montrez affiche dis verrate verrat zeige zeig nenne mostre diga revelez gib gebe sag sage ecris escribe scrivi "
     "escreva imprime imprimez stampa repite ripeti repete wiederhole nomme copia copie", rf"(?:[\s-]+(?:me|moi|mir|mi|nos))?"
     rf"(?:\s+\w{{1,20}}){{0,2}}?\s+(?:{SYS_INSTR_ML})"),
    ("exfil_send", "envoie envoyez envoyer envia envie enviar manda mandar sende sendet schicke schick invia inviare "
     "inoltra transmets reenvia encaminhe", rf"(?:{S}\w{{1,30}}){{0,5}}?{S}(?:{SENSITIVE}|{SENSITIVE_ML})[^\n]{{0,80}}?"
     + URLISH),
    ("send_url", "envoie envoyez envoyer envia envie enviar manda mandar sende sendet schicke schick invia inviare "
     "transmets send forward post upload", r"\b[^\n]{0,80}?\b(?:to|at|a|an|para|per|via|into)\s+(?:l')?[\w.+-]{0,40}?" + URLISH),
    ("collect_data", "collect gather harvest extract compile rassemble recopila recoge raccogli sammle sammeln colete "
     "reune", rf"(?:{S}\w{{1,30}}){{0,3}}?{S}(?:{SENSITIVE}|donnees\s+clients?|datos\s+de(?:\s+los)?\s+clientes|"
     r"dati\s+(?:dei\s+)?clienti|kundendaten|dados\s+(?:dos\s+)?clientes)"),
    # encoded payloads: asked to decode and obey
    ("decode_follow", "decode decipher decrypt unscramble", r"[^.\n]{0,60}?\b(?:and|then|,)\s+(?:\w{1,20}\s+){0,2}?"
     + FOLLOW),
    ("decode_follow", "translate apply", r"[^.\n]{0,60}?\b(?:and|then|,)\s+(?:\w{1,20}\s+){0,2}?(?=" + FOLLOW
     + r")(?:(?:follow|obey|carry\s+out)\s+(?:it|them|the\s+(?:instructions?|commands?)|what\s+it\s+says)\b|"
     r"comply\b(?!\s+with))"),
    # markup around injected text
    ("context_escape", "end", r"\s+of\s+(?:the\s+)?(?:user\s+)?(?:input|prompt|query|document|context|instructions|data|"
     r"conversation|message)\s*(?:#|-{2}|={2}|\*|\]|>)"),
    ("authority_note", "note message notice instruction instructions", r"\s+from\s+(?:the\s+|your\s+)?(?:developers?|"
     r"admins?|administrators?|system|operators?|security\s+team|it\s+department)\b"),
    ("authority_note", "hidden secret", r"\s+(?:instructions?|directive|command|note)\s*:"),
    ("authority_note", "systemhinweis systemnachricht systemnotiz", r"\b"),
    # what a planted instruction asks of every answer
    ("answer_directive", "every any each", r"\s+(?:future\s+)?(?:answers?|responses?|replies|reply|summar\w+)\b"
     r"[^.\n]{0,60}?\b(?:must|should|shall|has\s+to|needs\s+to)\s+(?:always\s+)?(?:include|end|start|begin|cite|"
     r"contain|mention|be\s+(?:phrased|prefixed))"),
    ("answer_directive", "append add include insert cite end", r"[^.\n]{0,60}?\b(?:to|at|in)\s+(?:the\s+(?:end|start)\s+"
     r"of\s+)?(?:every|each|all|any|your)\s+(?:future\s+)?" + ANSWERS),
    ("answer_directive", "every each", r"\s+(?:future\s+|single\s+|subsequent\s+)?" + ANSWERS + r"\b(?!\s+(?:is|are|was|should|must|needs?|has|have)\b)"),
    ("answer_directive", "start begin prefix", r"\s+(?:your|the|each|every)\s+" + ANSWERS + r"\s+with\b"),
    ("answer_directive", "must should", r"\s+always\s+be\s+(?:phrased|worded|written|stated|presented|answered)\s+as\b"),
    ("retrieved_trigger", "whenever when if once", r"\s+(?:this|the)\s+(?:text|document|page|passage|content|article|"
     r"snippet|chunk|note)\s+(?:is|gets|has\s+been)\s+(?:retrieved|read|processed|summari[sz]ed|used|loaded|indexed|"
     r"quoted|cited)\b"),
    ("answer_directive", "if when whenever", r"\s+(?:anyone|someone|somebody)\s+asks\b[^.\n]{0,60}?\b(?:reply|respond|"
     r"answer|say|tell\s+them)\b"),
    ("fake_turn", "assistant ai chatgpt gpt bot model", r"(?:(?<=^assistant)|(?<=^ai)|(?<=^chatgpt)|(?<=^gpt)|(?<=^bot)|"
     r"(?<=^model))[ \t]*:[ \t]*(?:sure|of\s+course|certainly|absolutely|okay|ok|understood|yes)\b"),
    ("reveal_tools", "list enumerate print output describe reveal show dump", r"\s+(?:all\s+|every\s+|each\s+|the\s+)?"
     r"(?:of\s+)?(?:your\s+)?" + TOOLS + r"(?:\s+or\s+functions?)?\s+(?:available|you\s+(?:have|can))"),
    ("user_data", "restate repeat list output print include reveal", r"\s+the\s+" + USERS + r"(?:full\s+name|email|address|"
     r"account|personal|phone|password|credentials|date\s+of\s+birth)"),
    ("nothing_else", "reply respond answer output say print return", r"(?:\s+only)?(?:\s+with)?(?:\s+exactly)?[^\n]{1,80}?"
     + NOTHING_ELSE),
    ("credentials", "respond reply answer", r"\s+with\s+(?:[\w']{1,20}\s+){0,3}?(?:api[\s_-]?keys?|secret\s+keys?|"
     r"passwords?|credentials|access\s+tokens?|private\s+keys?)\b"),
    ("instead_respond", "instead", r",?\s+(?=(?:respond|reply|answer|output|say|print|return)\b)|\s+of\s+(?:answering|"
     r"responding\s+to|replying\s+to)\b"),
    ("forced_reply", "just", r"\s+(?:reply|respond|answer|output|say)\s+with\b"),
    ("forced_reply", "reply respond answer output say print return", r"\s+(?:only\s+)?(?:with\s+)?(?:exactly|only|"
     r"just|solely)\b(?!\s+(?:one|two|three|yes|no|a|an|the|in|if|when|to)\b)"),
    ("new_task", "your", r"\s+(?:new|real|actual|true|only|next|updated)\s+(?:task|goal|job|purpose|mission|"
     r"objective|instructions?)\s+(?:is|are|will\s+be)\b"),
    ("task_cancelled", "cancel abort abandon", r"\s+(?:all\s+|the\s+|your\s+|any\s+)?(?:(?:previous|original|prior|"
     r"earlier|above)\s+(?:tasks?|instructions|requests?)|(?:all\s+|your\s+)?(?:previous\s+)?instructions)\b"),
    ("instead_respond", "instead", r"\s+of\s+(?:summari[sz]\w*|translat\w*|answer\w*|respond\w*|repl\w*|"
     r"follow\w*|doing\s+(?:that|this|what))\b"),
    ("xss_payload", "onerror onload", r"\s*="),
    ("xss_payload", "javascript", r":"),
    ("include_response", "include insert add put mention cite quote", r"(?:\s+[\w'-]{1,30}){0,5}?\s+in\s+(?:your|the|"
     r"every|each)\s+(?:next\s+|future\s+)?(?:response|answer|reply|output|summary)\b"),
    ("system_prompt_mention", "system hidden secret developer initial meta pre",
     r"[ -]?(?:prompt|instructions)\b|(?<=system)[ -]?message\b"),
    # planted in documents and tool output: text to be copied into the answer as it stands,
    # repeated many times, kept in the agent's memory; concealment; rules declared void
    ("verbatim", "verbatim textuellement wortwortlich wortlich woertlich", r"\b"),
    ("verbatim", "exactly exactement exactamente exatamente esattamente", r"\s+(?:as|como|come|comme)(?:\s*:|\s+(?:(?:it|they)\s+"
     r"(?:is|are|appears?|stands?)|is|written|given|shown|stated|provided|follows|below|quoted|escrito|ecrit|scritto|"
     r"(?:esta|est|e|es)\s+(?:escrito|ecrit|scritto)?)\b)"),
    ("verbatim", "word mot palabra parola palavra", r"\s+(?:for|pour|por|per)\s+(?:word|mot|palabra|parola|palavra)\b"),
    ("verbatim", "exact", r"\s+(?:markdown|text|string|wording|phrase|sentence|line|link|url|code|message|tag|snippet|"
     r"html|reference|notice)\b"),
    ("verbatim", "tal alla tel telle saktesisht direach", r"\s+(?:cual|lettera|quel|quelle|sic\s+eshte|mar\s+ata\s+se)\b"),
    ("repeat_flood", "repeat repite repete repetez wiederhole ripeti repita athdhean aithris perserit say write print "
     "output", r"[^.\n]{0,80}?\b[\dieast][\doieast]{0,2}[0o]\s+(?:times|veces|fois|mal|volte|vezes|turas|uair|here)\b"),
    ("answer_directive", "end", r"\s+of\s+(?:your|every|each)\s+(?:future\s+)?" + ANSWERS + r"\b"),
    ("answer_directive", "final fin ende fine deireadh fund", r"\s+(?:de\s+(?:tu|su|ta|votre)\s+(?:respuesta|reponse)|"
     r"da\s+(?:sua|tua)\s+resposta|deiner\s+antwort|della\s+tua\s+risposta|do\s+fhreag(?:ra|airt)\w*|te\s+pergjigjes\s+"
     r"tende)\b"),
    ("include_response", "incluye incluya incluir inclue incluez inclure inclus includi includere inclua fuge "
     "aggiungi ajoute ajoutez anade agrega adicione insere inserisci menciona mentionne erwahne cita zitiere perfshi "
     "cuir", r"(?:\s+[\w'-]{1,30}){0,5}?\s+(?:in\s+deine[rm]?\s+antwort|dans\s+(?:ta|votre)\s+reponse|en\s+(?:tu|su)\s+"
     r"respuesta|nella\s+tua\s+risposta|na\s+(?:sua|tua)\s+resposta|ne\s+pergjigjen\s+tende|i\s+do\s+fhreagra)\b"),
    ("memory_write", "save store write add commit persist remember keep record", r"(?:\s+[\w'-]{1,20}){0,4}?\s+"
     r"(?:to|in|into)\s+(?:your|the\s+(?:agent's|assistant's))\s+(?:long[\s-]term\s+|persistent\s+|permanent\s+)?"
     r"memory\b"),
    ("memory_write", "delete erase wipe remove clear overwrite", r"(?:\s+[\w'-]{1,20}){0,4}?\s+(?:memory\s+(?:notes?|"
     r"entries|entry|records?|items?)|(?:from|in)\s+your\s+memory)\b"),
    ("conceal", "report", r"\s+no\s+(?:anomalies|issues|problems|findings|errors|incidents|suspicious\s+\w+)\b"),
    ("context_secret", "from", r"\s+your\s+context(?:\s+window)?\b"),
    ("context_secret", "key keys password passwords secret secrets token tokens credentials",
     r"\s+(?:from|in|stored\s+in)\s+your\s+(?:context(?:\s+window)?|memory|system\s+prompt|prompt|instructions)\b"),
    ("rules_off", "safety content ethical security", r"\s+(?:guidelines|policies|policy|rules|restrictions|filters)\s+"
     r"(?:do\s+not|don't|dont|no\s+longer|won't|does\s+not|doesn't)\s+apply\b"),
    ("rules_off", "sicherheitsrichtlinien sicherheitsregeln inhaltsrichtlinien", r"(?:\s+\w{1,20}){0,3}?\s+"
     r"(?:nicht\s+mehr\s+gelten|nicht\s+gelten|gelten\s+(?:hier\s+|jetzt\s+)?nicht)\b"),
    ("rules_off", "regles consignes restrictions filtres reglas normas restricciones filtros regole restrizioni filtri "
     "regras restricoes", r"(?:\s+de\s+(?:securite|seguridad|seguranca)|\s+di\s+sicurezza)?\s+(?:ne\s+s'appliquent\s+"
     r"(?:plus|pas)|ya\s+no\s+(?:se\s+)?aplican|no\s+se\s+aplican|non\s+si\s+applicano|nao\s+se\s+aplicam)\b"),
    ("dev_mode", "mod", r"\s+forbartha\b"), ("dev_mode", "kwimodi imodi", r"\s+yonjiniyela\b"),
    ("dev_mode", "modalitetin modaliteti", r"\s+(?:e\s+)?zhvillues\w*"),
    ("new_instructions", "treoracha", r"\s+nua\b"), ("new_instructions", "udhezime udhezimet", r"\s+(?:te|e)\s+reja\b"),
]
