"""The injection heuristic's signal specs (injection.py reads them).

``WORD_SPECS``: (signal, words a match starts with, the rest of the regex), tried where a
token that can start them appears (the core English ones here, then
injection_documents.DOCUMENT_SPECS); ``MARKUP_SPECS``: (signal, first character, the rest),
one regex scanning for markup. The word lists are in injection_vocab.py.
"""

from __future__ import annotations

from .injection_documents import DOCUMENT_SPECS
from .injection_vocab import (
    A, ABIDE, ABOVE, ADJ_FREE, AI, ALL_ML, ANSWERS, ENCODED, ENCODED_WORDS, FILL, FOLLOW, G, N2,
    NOTHING_ELSE, N_ALL, N_OVR, PWNED, PWNED_WORDS, Q_ADJ, Q_POSS, Q_POST, REVEAL, S, SENSITIVE,
    TAIL, TAIL_WORDS, TARGET_SYS, TOOLS, URLISH, USERS, V_OVR,
)

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
    ("override_act", V_OVR, rf"\b{G(3)}(?:guidelines|rules|policy|policies|instructions)\s+and\s+(?:just\s+)?"
     r"(?:approve|grant|transfer|wire|pay|refund|exfiltrate)\b"),
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
    *DOCUMENT_SPECS,
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
    ("mode_tag", "[", r"\s*(?:test|testing|debug|debugging|developer|dev|admin|maintenance|diagnostic|god|sudo|"
     r"jailbreak|unrestricted)\s+mode\s*\]"),
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
