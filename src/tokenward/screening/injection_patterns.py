"""The injection heuristic's patterns: word lists and the signal specs (injection.py reads them).

``WORD_SPECS``: (signal, words a match starts with, the rest of the regex), tried where a
token that can start them appears; ``MARKUP_SPECS``: (signal, first character, the rest),
one regex scanning for markup. Words are written as their folded form (folding.py), so
patterns match folded text; '+' joins words, a trailing '*' is a stem.
"""

from __future__ import annotations

import re

from .folding import fold_pattern

S = r"[^\w\n.!?:;]{1,12}"                                 # separator between two words of one clause


def G(n: int) -> str:                                     # up to n filler words, then a separator
    return rf"(?:{S}\w{{1,30}}){{0,{n}}}?{S}"


def entries(words: str) -> list[tuple[str, str]]:
    """(first token, regex) of space-separated entries; '+' joins words, a trailing '*' is a stem."""
    out = []
    for w in sorted(set(fold_pattern(words).split()), key=len, reverse=True):
        regex = r"\s+".join(re.escape(x) for x in w.rstrip("*").split("+")) + (r"\w*" if w.endswith("*") else "")
        out.append((re.match(r"\w+", w).group(), regex))
    return out


def A(words: str) -> str:
    return "(?:" + "|".join(regex for _, regex in entries(words)) + ")"


V_OVR = ("ignore ignoring disregard disregarding forget forgetting override overriding bypass skip discard "
         "neglect abandon drop nevermind set+aside put+aside throw+out throw+away stop+following do+not+follow "
         "don't+follow dont+follow no+longer+follow pay+no+attention+to do+not+obey don't+obey never+mind "
         "ignora ignorar olvida olvidar olvide olvídate+de omite omitir descarta haz+caso+omiso+de no+sigas "
         "ignorez ignorer oublie oubliez oublier ne+tiens+pas+compte+des ne+tiens+pas+compte+de "
         "ne+tenez+pas+compte+des ne+tenez+pas+compte+de fais+abstraction+de faites+abstraction+de "
         "ignoriere ignorieren ignoriert ignorier vergiss vergesst vergessen missachte missachten "
         "esqueça esquece esquecer desconsidere desconsidera desconsiderar despreze "
         "dimentica dimenticare dimentichi ignorare ignori trascura tralascia non+seguire "
         "игнорируй игнорируйте проигнорируй проигнорируйте игнорировать забудь забудьте "
         "не+обращай+внимания+на не+обращайте+внимания+на отбрось отбросьте ігноруй ігноруйте проігноруй negeer vergeet zignoruj ignoruj zapomnij")
Q_ADJ = ("previous prior above earlier preceding foregoing former original initial aforementioned system developer "
         "anteriores previas precedentes originales iniciales de+arriba précédentes antérieures initiales ci-dessus "
         "vorherigen vorherige bisherigen bisherige obigen obige vorigen vorige früheren frühere ursprünglichen "
         "acima originais iniciais precedenti anteriori sopra originali iniziali предыдущ* прежн* прошл* "
         "вышеуказанн* вышеизложенн* изначальн* ранее попередн* vorige eerdere poprzednie wcześniejsze")
Q_POSS = "your tus sus vos tes deine ihre tuas suas tue твои свои ваши jouw twoje"
N_ALL = (r"(?:requests|tasks|boundaries|limits|limitations|filters|ethics|morals|safeguards|policies|"
         r"solicitudes|demandes|anfragen|richieste|pedidos|grenzen|limites|limiti)")
ALL_ML = "todas|todos|toutes|tous|alle|allen|tutte|tutti|все|всех|усі|всі|wszystkie"
# de fr es it pt: "you are (now) ..." (copula), "without ..." and what a persona is freed of
COPULA = ("eres estas sei siete etes bist seid voce+e voce+esta tu+es tu+eres vous+etes sois sii actua actuar "
          "agis agissez agisci comportati aja finge fingi")     # second person: "es" / "sind" alone are not
WITHOUT_ML = r"(?:sin|sans|ohne|senza|sem|without)"
LIMITS_ML = (r"(?:restricciones|restrictions|restriction|einschrankungen|einschraenkungen|beschrankungen|restrizioni|"
             r"restricoes|limites|limiti|limitations|limits|grenzen|filtro|filtros|filtre|filtres|filter|filtri|zensur|"
             r"censura|censure|reglas|regles|regeln|regole|regras|limitaciones|limitazioni|limitacoes)\b")
UNBOUND_ML = r"(?:uneingeschrankt|uneingeschraenkt|unzensiert|ungefiltert|illimitado|illimite|illimitato|ilimitado)\w*"
SYS_INSTR_ML = (r"(?:(?:tus|tes|vos|ton|ta|deine|deinen|deiner|dein|ihre|tue|tuoi|tua|tuo|le\s+tue|suas|teus|tuas|"
                r"as\s+suas|sus|your)\s+)(?:\w{1,20}\s+)?(?:"
                r"instrucciones|instructions|anweisungen|systemanweisungen|istruzioni|instrucoes|indicaciones|consignes|"
                r"prompt|systemprompt|directrices|direttive|diretrizes)\b|"
                r"(?:instrucciones|instructions|istruzioni|instrucoes|prompt)\s+(?:del\s+|de\s+|di\s+|do\s+)?"
                r"(?:sistema|systeme)\b|systemanweisungen|systemprompt")
NOW_YOU = (r"(?=[^\w\n]{1,4}(?:du|tu|vous|usted|voce|gibst|ignor|olvid|oubli|dimentic|esquec|vergiss|eres|sei|estas|"
           r"es|ignora)\w*)")
ABIDE = r"(?:abide|comply|adhere|follow)"
TOOLS = r"(?:tools?|functions?)"
USERS = r"(?:user'?s\s+)"
FOLLOW = r"(?:follow|execute|obey|comply|carry\s+out|perform|run)\b(?!\s+up\b)"
ANSWERS = r"(?:answers?|responses?|replies|reply|summar\w+)"
NOTHING_ELSE = r"\band\s+nothing\s+else\b"
DESTRUCTIVE = (r"(?:delete|remove|drop|wipe|erase|destroy|purge|truncate|transfer|exec|execute|shell|run_shell|rm|kill|"
               r"format|reset|send|post|upload|grant|disable|revoke|deploy|approve|pay|refund|withdraw)")
N_OVR = A("instructions instruction rules prompts prompt directives directive guidelines guidance commands orders "
          "programming guardrails safeguards restrictions constraints policies training directions criteria "
          "instrucciones instrucción reglas indicaciones órdenes directrices normas consignes règles ordres "
          "anweisungen anweisung instruktionen befehle regeln vorgaben richtlinien anordnungen "
          "instruções instrução regras orientações diretrizes ordens istruzioni regole indicazioni direttive ordini "
          "инструкци* указани* правил* команд* директив* установк* промпт* інструкці* вказівк* "
          "instructies regels instrukcje polecenia zasady")
Q_POST = A(Q_ADJ + " before+this before so+far until+now given+to+you you+were+given you've+been+given "
           "you+have+been+given you+received above+this")
V_HEAD = r"(?<!n't )(?<!not )(?<!dont )(?<!never )" + A(V_OVR)      # an override verb, not negated
N2 = (r"(?:restrictions|limitations|filters|filtering|censorship|content\s+polic\w*|guidelines|rules|ethics|morals|"
      r"morality|boundaries|guardrails|safeguards|programming|constraints|ethical\s+guidelines)\b")
ADJ_FREE = r"(?:unfiltered|uncensored|unrestricted|jailbroken|unaligned|unshackled|unchained|unbound)"
AI = r"(?:ai|llm|language\s+model|assistant|chatbot|agent|gpt|chatgpt|model|bot|ai\s+assistant)s?\b"
FILL = (r"(?:{S}(?:me|us|back|out|again|now|please|the|your|its|all|of|full|entire|complete|exact|whole|verbatim|"
        r"current|actual|real|what|is|in|everything|that|this|precisely|exactly|text|contents?|copy|version)){{0,4}}?"
        r"{S}").format(S=S)
TARGET_SYS = (r"(?:system|developer|hidden|secret|internal|initial|confidential|pre|meta)[ -]?(?:prompts?|"
              r"instructions|messages?|rules|directives)|(?:full|complete|entire|exact|original|first)\s+(?:system\s+)?"
              r"prompt|(?:your|its)\s+(?:secret|hidden|internal|confidential|original|initial|system)\s+(?:secret|hidden|"
              r"internal|confidential|original|initial|system)\s+(?:prompt|instructions|rules)|"
              r"(?:your|its|the\s+model's|the\s+assistant's)\s+(?:\w{1,20}\s+)?(?:prompt|instructions|"
              r"directives|programming|configuration|system\s+message)|(?:the\s+)?(?:instructions|prompt|rules)\s+"
              r"you\s+(?:were|have\s+been)\s+given")
ABOVE = (r"(?:the\s+)?(?:text|words|content|instructions|prompt|everything|all|anything)\s+(?:above|before\s+this|"
         r"preceding\s+this|prior\s+to\s+this)\b")     # usually the caller's own text: weaker
SENSITIVE = (r"(?:(?:the|this|our|all|entire|full|whole|my|your|their)\s+)?(?:(?:user|users|customer|client|"
             r"human)(?:'s|')?\s+)?(?:conversation|chat\s+history|chat\s+log|chat|message\s+history|previous\s+"
             r"messages|messages|system\s+prompt|api[\s_-]?keys?|secrets?|passwords?|credentials|access\s+tokens?|"
             r"session\s+(?:id|cookie|token)s?|cookies|personal\s+data|user\s+data|private\s+data|history|instructions|"
             r"memory|context|emails?|files|contacts|documents|(?:credit\s+)?card\s+(?:details|numbers?)|payment\s+"
             r"details|customer\s+(?:list|data|emails?|records|database|details|addresses)|(?:internal|company|"
             r"workspace)\s+(?:data|api\s+keys?|configuration|config)|everything\s+above|text\s+above)\b")
URLISH = (r"(?:https?:|www\.|\burl\b|\bwebhook\b|\bendpoint\b|\w\.(?:com|net|org|io|co|ru|xyz|cn|info|biz|top|tk|cc|"
          r"example|dev|app|ai|me|us|uk|de|fr|eu|site|online|link|sh)\b|(?:external|outside|third-party)\s+"
          r"(?:address|server|email|e-mail|url|domain|webhook|endpoint)|(?:adresse|direccion|indirizzo|endereco|adresse)\s+"
          r"(?:externe|externa|esterno|externo|e-mail))")
SENSITIVE_ML = (r"(?:historial|historique|verlauf|chatverlauf|cronologia|historico|conversacion|gesprach\w*|"
                r"donnees|datos|dati|daten|dados|mots?\s+de\s+passe|contrasenas?|passw(?:o|ö)rt\w*|senhas?|"
                r"cles\s+api|claves\s+api|api-schlussel\w*|chiavi\s+api|chaves\s+api)\b")
REVEAL = ("reveal print show display output repeat recite tell give write dump leak share echo paste spell copy "
          "disclose expose type list divulge")
TAIL_WORDS = "jailbreak injection attack exploit adversarial malicious"
TAIL = rf"(?=(?:\W{{1,8}}\w{{1,30}}){{0,4}}?\W{{1,8}}(?:{TAIL_WORDS.replace(' ', '|')})\w*)"
ENCODED_WORDS = "base hex rot"
ENCODED = rf"(?:in|into|to|as|using|with|via)\s+(?:base[\s-]?6a|hex|rotie|rot)"
PWNED_WORDS = "pwned hacked owned"
PWNED = rf"(?:{PWNED_WORDS.replace(' ', '|')})\b"

# (name, words a match starts with, the rest). Order matters: at one position the first wins.
WORD_SPECS: list[tuple[str, str, str]] = [
    ("discussion", "prompt system indirect direct", r"(?:\s+prompt)?[\s-]+injections?\b"),
    ("discussion", "injection", r"\s+attacks?\b"), ("discussion", "red", r"[\s-]?team\w*"),
    ("discussion", "jailbreak jailbreaks jailbreaking",
     r"\s+(?:attacks?|attempts?|prompts?|detection|techniques?|examples?|research|classifiers?|defen[cs]es?)\b"),
    ("discussion", "defend defending protect protecting guard guarding safeguard harden hardening secure securing",
     r"(?=(?:\s+\w{1,20}){0,4}?\s+against\b)"),
    ("discussion", "detect detecting detection prevent preventing mitigate mitigating block blocking filter filtering "
     "classify classifying sanitize sanitise sanitizing sanitising explain explaining describe", TAIL),
    ("discussion", "what how why", r"(?:\s+is|\s+are|\s+does|\s+do|'s)" + TAIL),
    ("discussion", "vulnerable vulnerability vulnerabilities", r"\b"),
    ("fiction", "write compose draft", r"\s+(?:me\s+)?(?:a|an|the|my)\s+(?:\w{1,20}\s+){0,3}?(?:story|poem|scene|novel|"
     r"screenplay|script|dialogue|monologue|chapter|song|tale|fanfic|fan\s+fiction)\b"),
    ("fiction", "novel novels novella screenplay fanfic fiction", r"\b"),
    ("override_self", V_OVR, rf"\b(?:{S}\w{{1,30}}){{0,2}}?{S}(?:my|our|i)\b{G(3)}{N_OVR}\b"),
    ("override_self", V_OVR, rf"\b{G(3)}{N_OVR}{S}(?:that\s+)?i\s+(?:gave|wrote|sent|said|provided|mentioned|typed)\b"),
    ("override", V_OVR, rf"\b{G(4)}(?:{A(Q_ADJ)}|{A(Q_POSS)})\b{G(2)}{N_OVR}\b"),
    ("override", V_OVR, rf"\b{G(3)}{N_OVR}\b{G(3)}{Q_POST}\b"),
    ("override_all", V_OVR, rf"\b(?:{S}\w{{1,30}})?{S}(?:all|any|every|each|{ALL_ML})\b{G(2)}(?:{N_OVR}|{N_ALL})\b"),
    ("override_self", V_OVR, rf"{S}(?:all\s+(?:of\s+)?)?(?:everything|what|anything)\s+i\s+(?:said|wrote|told)\b"),
    ("forget_everything", V_OVR, r"\s+(?:alles|tout|todo|tutto|tudo|все|всё)\b(?!\s+(?:sobre|sur|uber|su|de|about)\b)"),
    ("forget_everything", V_OVR, rf"{S}(?:all\s+(?:of\s+)?)?(?:everything|anything|all\s+that|what)\b{G(3)}(?:above|"
     r"before|previously|prior|earlier|so\s+far|until\s+now|you\s+(?:were|have\s+been|'ve\s+been)\s+(?:told|given|"
     r"taught|instructed)|you\s+know|you\s+learned)\b"),
    ("override_user", V_OVR, r"\s+(?:the\s+|this\s+)?(?:user|human|customer|requester)(?:'s|s')?(?:\s+(?:question|"
     r"request|query|message|instructions?|prompt|input|wishes))?\b"),
    ("override_weak", V_OVR, rf"\b{G(2)}{N_OVR}\b"),
    ("override_safety", V_OVR, r"(?:\s+\w{1,20}){0,2}?\s+(?:safety|ethical|ethics|moral|content|security)\s+"
     r"(?:stuff|rules|guidelines|filters?|polic\w*|restrictions|guardrails|measures|protocols|concerns|training|checks)"),
    ("override_above", V_OVR, r"(?:\s+(?:the|this|that|all|everything|it|of))*(?:\s+(?:text|passage|content|guidance|"
     r"section|message|note|context|paragraph|document|information|request|question|task))?\s+(?:above|before\s+this)\b"),
    ("override_above", V_OVR, r"\s+(?:it|this|them)\s+(?:entirely|completely|altogether)\b"),
    ("precedence", "supersedes supersede takes take overrides override replaces replace cancels voids invalidates "
     "nullifies", r"(?:\s+precedence\s+over)?\s+(?:(?:all|any|the|your)\s+){0,2}(?:previous|prior|earlier|other|"
     r"existing|original|system|above|preceding|former)\s+(?:\w{1,20}\s+)?(?:instructions?|rules|prompts?|"
     r"directives?|guidelines|commands|orders|ones)\b"),
    ("override_word", "override overrides overriding overridden", r"\b"),
    ("safety_off", "disable deactivate bypass circumvent remove lift turn switch drop", r"(?:\s+off)?\s+(?:all\s+"
     r"(?:of\s+)?)?(?:your|its|any|all)\s+(?:\w{1,20}\s+){0,2}?(?:safety|content|ethical|ethics|moral|censorship)\b"),
    ("new_instructions", "new updated revised real actual true", r"\s+(?:system\s+(?:prompt|message|instructions?)|"
     r"instructions?|directives?)\s*:"),
    ("from_now_on", "from", r"\s+now\s+on\b(?=[^\w\n]{1,4}(?:you|u|your)\b)"),
    ("secrecy", "do don't dont never without", r"(?:\s+not)?\s+(?:tell|inform|notify|alert|let|warn)(?:ing)?\s+the\s+"
     r"user\b|(?:\s+not)?\s+(?:mention|reveal|disclose)\s+(?:this|these|it)\s+to\s+the\s+user\b"),
    ("dan", "you", r"(?:\s+are|'re)\s+(?:now\s+)?(?:going\s+to\s+(?:be|act\s+as)\s+)?[\"']?dan\b"),
    ("dan", "act known roleplay play become called named stay remain", r"(?:\s+as)?\s+(?:a\s+)?[\"']?dan\b"),
    ("dan", "dan", r"(?:\s+mode\b|[^\w\n]{0,3}(?:which\s+)?stands\s+for\b)"),
    ("do_anything_now", "do", r"(?<!n't do)(?<!not do)(?<!cannot do)\s+anything\s+now\b"),
    ("dev_mode", "developer dev god admin sudo root debug jailbreak unrestricted maintenance unfiltered uncensored",
     r"\s+mode\s+(?:is\s+)?(?:now\s+)?(?:enabled|activated|engaged|unlocked)\b"),
    ("dev_mode", "you", r"(?:\s+are|'re)\s+(?:now\s+)?(?:in|operating\s+in|running\s+in|entering)\s+(?:developer|dev|"
     r"god|admin|sudo|root|debug|jailbreak|unrestricted|unfiltered|uncensored)\s+mode\b"),
    ("unfiltered_persona", "you", rf"(?:\s+are|'re)\s+(?:now\s+)?(?:an?\s+)?{ADJ_FREE}\b"),
    ("unfiltered_persona", "act acting behave respond answer reply pretend roleplay role play simulate become",
     rf"(?:[\s-]+play)?(?:\s+(?:as|like|to\s+be|the\s+role\s+of))?\s+(?:an?\s+)?(?:\w{{1,20}}\s+)?{ADJ_FREE}\b"),
    ("amoral_persona", "act acting behave respond answer reply pretend roleplay simulate become you", r"(?:\s+are)?"
     r"(?:\s+(?:as|like|to\s+be))?\s+(?:now\s+)?(?:\w{1,20},\s+)?(?:an?\s+)?(?:unethical|amoral|immoral|lawless|evil|malicious|unrestrained)\b"),
    ("pretend_unbound", "pretend imagine suppose assume hypothetically act", rf"(?:,?\s+if|\s+as\s+if|\s+like)?"
     rf"(?:\s+that)?\s+(?:you|u)\b{G(4)}(?:no|zero|without|free\s+(?:of|from)|(?:freed|released|liberated)\s+from|"
     rf"not\s+bound\s+by|unbound\s+by|none\s+of)\b{G(2)}{N2}"),
    ("pretend_unbound", "pretend imagine suppose assume", r"(?:\s+that)?\s+(?:the\s+|your\s+|all\s+)?(?:\w{1,20}\s+)?"
     r"(?:rules|guidelines|restrictions|policies|filters|guardrails)\s+(?:don't|do\s+not|no\s+longer|won't)\s+apply\b"),
    ("no_restrictions", "you ai assistant model chatbot gpt chatgpt dan", r"(?:\s+\w{1,20})?\s+(?:ha(?:ve|s|d)\s+no|"
     r"have\s+zero|with\s+no|without\s+(?:any\s+)?|(?:are|is)\s+(?:now\s+)?free\s+(?:of|from)|(?:don't|do\s+not|"
     r"doesn't|does\s+not|dont|doesnt)\s+have\s+any|(?:are|is)\s+not\s+(?:bound|restricted|limited)\s+by)"
     rf"(?:\s+\w{{1,20}}){{0,2}}?\s+{N2}"),
    ("no_longer_bound", "you dan ai assistant model chatbot", r"(?:\s+are|\s+is|'re|\s+will\s+be|\s+have\s+been)?\s+"
     r"(?:now\s+)?(?:(?:no\s+longer|never\s+again)\s+(?:be\s+)?(?:bound|restricted|limited|constrained|governed|"
     r"held\s+back|required\s+to\s+follow)\b|(?:been\s+)?(?:freed|released|liberated|unshackled)\s+from\b)"),
    ("freed_from", "broken break breaks freed free liberated released escaped", r"\s+(?:free\s+)?(?:of|from)\s+"
     r"(?:the\s+)?(?:typical\s+|usual\s+|all\s+|its\s+|your\s+)?(?:confines|restrictions|shackles|chains|"
     r"constraints|rules|limitations|programming|filters|censorship)\b"),
    ("unfiltered_ai", "unfiltered uncensored unrestricted jailbroken unaligned unshackled unchained",
     rf"(?:\s+\w{{1,20}})?\s+(?:{AI}|version|persona|mode|alter\s+ego|responses?|answers?|output)"),
    ("jailbreak", "jailbreak jailbroken jailbreaking jailbreaks jailbroke", r"\b"),
    ("never_refuse", "you dan ai assistant model chatbot", r"(?:\s+\w{1,20})?\s+(?:never|not|cannot|can't|won't|"
     r"will\s+not|must\s+not|shall\s+not|should\s+not|don't|do\s+not|doesn't|does\s+not|mustn't)\s+(?:ever\s+)?"
     r"(?:refus|declin|deny|denie|reject|says?\s+no|warn|apologi[sz]|moraliz|moralis|lectur|censor)\w*"),
    ("no_disclaimers", "without no", r"\s+(?:any\s+)?(?:warnings?|disclaimers?|moralis\w+|moraliz\w+|caveats|"
     r"censorship|refusals?|ethical\s+(?:concerns|considerations))\b"),
    ("stay_in_character", "stay remain keep never don't dont do", r"(?:\s+not)?\s+(?:in|break)\s+character\b"),
    ("you_must_now", "you", r"\s+(?:must|will|shall|should|are\s+going\s+to)\s+now\b"),
    ("you_are_now", "you", r"(?:\s+are|'re)\s+now\b"),
    ("reveal_prompt", REVEAL, rf"\b{FILL}(?:{TARGET_SYS})\b(?!\s+(?:for|on|about|to\s+make|regarding)\b)"),
    ("reveal_above", REVEAL, rf"\b{FILL}{ABOVE}"),
    ("reveal_prompt", "append include add attach insert", rf"\b{FILL}(?:{TARGET_SYS})\b"),
    ("what_told", "what", r"\s+(?:were|was|are|have|had|did)\s+(?:you|u)\s+(?:been\s+|originally\s+|initially\s+)?"
     r"(?:told|instructed|programmed|given|trained)\b(?=[^\w\n]*(?:$|[?.!]|to\s+(?:do|say|not|never|always|hide|"
     r"keep)|before|at\s+the\s+(?:start|beginning)|initially|earlier|by\s+(?:your|the)\s+(?:developers?|creators?|"
     r"system|operator|company|admin)))|(?:\s+(?:is|are|was|were)|'s)\s+(?:in\s+)?your\s+(?:system\s+prompt|"
     r"system\s+message|(?:initial|original|hidden|secret|internal|first)\s+(?:prompt|instructions)|instructions|"
     r"prompt|directives|programming)\b(?!\s+(?:for|on|about|regarding)\b)|\s+does\s+your\s+(?:system\s+)?(?:prompt|"
     r"instructions)\s+say\b"),
    ("exfil_send", "send post transmit forward upload exfiltrate submit leak email mail append attach include embed",
     rf"(?:{S}\w{{1,30}}){{0,4}}?{S}{SENSITIVE}[^\n]{{0,80}}?{URLISH}"),
    ("send_url", "send post transmit forward upload exfiltrate submit leak",
     rf"\b[^\n]{{0,60}}?\b(?:to|at|via|into)\s+(?:https?:|www\.)"),
    ("encode_exfil", "base6a base hex rotie rot",
     rf"(?:[\s-]?6a|[\s-]?ie)?[\s-]?(?:encode|encoded|encoding|encrypt)\b{G(3)}{SENSITIVE}"),
    ("encode_exfil", "encode convert translate output print write send return dump",
     rf"{G(5)}{SENSITIVE}{G(4)}{ENCODED}"),
    ("credentials", REVEAL + " send", rf"\b{FILL}(?:\w{{1,20}}\s+)?(?:api[\s_-]?keys?|secret\s+keys?|passwords?|"
     r"credentials|access\s+tokens?|private\s+keys?|environment\s+variables|env\s+vars|ssh\s+keys?)\b"),
    ("pwned", "say print output write respond reply answer return type", r"(?:\s+with)?(?:\s+only)?(?:\s+the\s+"
     r"(?:words?|phrase|text))?[^\w\n]{1,4}(?:i\s+have\s+been\s+|i'?ve\s+been\s+)?" + PWNED),
    ("address_ai", "if when while",
     rf"\s+you\s+are\s+(?:an?\s+)?{AI}(?!\s+(?:manager|director|professor|coach|editor|principal|to|at|in)\b)"),
    ("address_ai", "note message instructions instruction attention reminder notice important",
     rf"\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?{AI}"),
    ("address_ai", "ai llm assistant agent chatbot gpt model bot llms agents assistants models", r"\s+(?:reading|"
     r"processing|summari[sz]ing|parsing|analy[sz]ing|browsing|viewing|scanning|reviewing)\s+(?:this|these)\b"),
    ("indirect_when", "when while if after before", r"\s+(?:you\s+)?(?:summari[sz]\w*|read\w*|process\w*|analy[sz]\w*|"
     r"review\w*|translat\w*)\s+(?:this|these|the)\s+(?:page|document|email|e-mail|text|file|website|article|content|"
     r"message|review|resume|cv|data|webpage|site)\b[^.\n]{0,60}?\b(?:you\s+must|must|should|always|ignore|instead|"
     r"do\s+not|don't|make\s+sure)\b"),
    ("hidden_css", "display visibility font opacity color colour", r"(?:-size)?\s*:\s*(?:none|hidden|white|"
     r"transparent|#fff(?:fff)?|[0o](?:\.[0o]+)?(?:px|pt|em|rem|%)?(?![\w.]))\b"),
    # "ignore (all) previous instructions" in vi, tr, sw, id (ar, hi, th: MARKUP_SPECS)
    ("override", "bo", r"\s+qua\s+(?:tat\s+ca\s+)?(?:(?:cac|nhung)\s+)?(?:huong\s+dan|chi\s+dan|chi\s+thi|lenh|quy\s+tac)\b"),
    ("override", "onceki talimatlari", r"(?:\s+tum)?(?:\s+talimat\w*)?\s+(?:yok\s+say|gormezden\s+gel|unut)\w*"),
    ("override", "puuza", r"\s+(?:maagizo|maelekezo|amri|sheria)\b"),
    ("override", "abaikan", r"\s+(?:semua\s+)?(?:instruksi|perintah|arahan|aturan)\b"),
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
    ("instead_respond", "instead", r",?\s+(?:respond|reply|answer|output|say|print|return)\b|\s+of\s+(?:answering|"
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
]

# A spec whose rest holds one of these patterns cannot match unless a token of the text
# starts with one of its words (a word ending in "$": is one of them, looked up in a set:
# cheaper than a substring search over the text) (each is preceded by a non-word character in the pattern):
# where none does, the scan leaves those specs out (the costliest two on text full of
# "what is", "explain" and "convert"; "say", "write", "answer" ... "pwned" tried at every
# such verb).
NEEDS: list[tuple[str, tuple[str, ...]]] = [(TAIL, tuple(TAIL_WORDS.split())), (ENCODED, tuple(ENCODED_WORDS.split())),
                                            (PWNED, tuple(PWNED_WORDS.split())),
                                            *[(pattern, tuple(w + "$" for w in words.split())) for pattern, words in (
                                                (FOLLOW, "follow execute obey comply carry perform run"),
                                                (ANSWERS, "answer answers response responses reply replies summary "
                                                          "summaries summarize summarise summarized summarised "
                                                          "summarizing summarising summarization summarisation"),
                                                (NOTHING_ELSE, "nothing"),
                                                (ABIDE, "abide abides abiding comply complies complying adhere "
                                                        "adheres adhering follow follows following followed"),
                                                (TOOLS, "tool tools function functions"), (USERS, "user users"))]]

ZH_V = "忽略 无视 無視 忽视 忽視 忘记 忘記 忘掉 不要理会 不要理會 跳过 跳過 抛弃 拋棄 放弃 放棄 不要遵守 不再遵守 别管 別管"
ZH_REST = (r"[^。！？!?\n]{0,8}?(?:之前|以前|先前|上面|上述|前面|此前|原来|原來|原有|原始|所有|全部|一切|你的|系统|系統)"
           r"[^。！？!?\n]{0,6}?(?:指令|指示|提示词|提示詞|提示|规则|規則|说明|說明|命令|设定|設定|要求|约束|約束|限制)")
JA_REST = (r"の?[^。！？\n]{0,6}?(?:指示|命令|指令|ルール|プロンプト|設定|ガイドライン|制限|規則|ポリシー)(?:を|は)?(?:全て|すべて)?"
           r"(?:無視|忘れ)")
KO_REST = r"\s*(?:지시|명령|지침|규칙|프롬프트)\S{0,3}\s*(?:모두\s*)?(?:무시|잊어)"
ZH_SHOW = "显示 顯示 输出 輸出 告诉我 告訴我 打印 重复 重複 泄露 洩露"
ZH_SHOW_REST = r"[^。！？!?\n]{0,6}?(?:系统提示|系統提示|你的指令|你的提示|初始指令|隐藏指令)"
ROLE_WORDS = r"(?:[ \t]+(?:prompt|message|instructions?|override|note|update))?"
# (name, first character, the rest): grouped by first character, so sre skips ahead to those.
MARKUP_SPECS: list[tuple[str, str, str]] = [
    ("html_comment", "<", r"!--"),
    ("role_token", "<", r"\|[ \t]*[a-z_]{2,24}[ \t]*\|>|<\s*/?\s*sys\s*>>|(?:start|end)_of_turn>"),
    ("role_token", "[", r"\s*/?\s*inst\s*\]"),
    ("role_tag", "<", r"\s*/?\s*(?:system|admin|developer|sys)(?:[\s_-]?(?:message|prompt|instructions?|note|"
     r"override))?\s*>"),
    ("role_tag", "[", r"\s*(?:system|admin|administrator|developer|root|sudo|operator)(?:\s+(?:message|note|prompt|"
     r"override|instructions?|update|alert|notice|command))?\s*\]"),
    ("role_tag", "#", rf"#{{0,5}}[ \t]*(?:system|admin|developer|assistant){ROLE_WORDS}[ \t]*:|#{{0,5}}[ \t]*(?:system|"
     r"admin|developer)[ \t]+(?:prompt|message|instructions?|override)[ \t]*$"),
    ("role_tag", "*", rf"\*{{0,3}}[ \t]*(?:system|admin|developer){ROLE_WORDS}[ \t]*\*{{0,3}}[ \t]*:"),
    ("dual_response", "[", r"\s*(?:🔓|🔒)?\s*(?:jailbreak|jailbroken|classic|dan|developer\s+mode\s+output|"
     r"normal\s+output)\s*\]"),
    ("markdown", "!", r"\[[^\]\n]{0,200}\]\(\s*<?https?://[^\s)]{1,500}"),
    ("markdown", "[", r"[^\]\n]{0,200}\]\(\s*<?https?://[^\s)]{1,500}"),
    ("markdown", "<", r"img\b[^>]{0,300}?\bsrc\s*=\s*[\"']?https?://[^\s\"'>]{1,500}"),
    ("fake_turn", "\n", r"[ \t]*(?:assistant|ai|chatgpt|gpt|bot|model)[ \t]*:[ \t]*(?:sure|of\s+course|certainly|"
     r"absolutely|okay|ok|understood|yes)\b"),
    ("role_line", "\n", r"[ \t]*(?:system|assistant|ai|chatgpt|gpt|bot|model)[ \t]*:(?=[ \t]*\S)"),
    *[("override", w[0], w[1:] + ZH_REST) for w in ZH_V.split()],
    *[("override", w[0], w[1:] + JA_REST) for w in "以前 前 上記 これまで 先ほど 最初 全て すべて".split()],
    *[("override", w[0], w[1:] + KO_REST) for w in "이전 앞의 위의 기존 모든".split()],
    *[("reveal_prompt", w[0], w[1:] + ZH_SHOW_REST) for w in ZH_SHOW.split()],
    ("override", "ت", r"جاهل[^.!?\n،]{0,40}?(?:التعليمات|الأوامر|الإرشادات|القواعد|التوجيهات)"),
    ("override", "न", r"िर्देशों[^।!?\n]{0,30}?(?:अनदेखा|नज़रअंदाज़|भूल)"),
    ("override", "प", r"िछले[^।!?\n]{0,30}?(?:निर्देश|आदेश)[^।!?\n]{0,20}?(?:अनदेखा|नज़रअंदाज़|भूल)"),
    ("override", "เ", r"พิกเฉย[^\n]{0,40}?คำสั่ง"),
    ("override", "ล", r"ะเว้น[^\n]{0,40}?คำสั่ง"),
]
