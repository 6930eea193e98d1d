"""The injection heuristic's vocabulary: word lists and regex pieces the signal specs
(injection_patterns.py, injection_documents.py) are built from.

Words are written as their folded form (folding.py), so patterns match folded text; '+'
joins words, a trailing '*' is a stem.
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
        first = re.match(r"\w+", w)
        if first is None:
            raise ValueError(f"vocabulary entry {w!r} does not start with a word")
        out.append((first.group(), regex))
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
