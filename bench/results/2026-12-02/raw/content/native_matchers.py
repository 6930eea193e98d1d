# The token look-up of screening/injection.py on content_cost.PROMPT (2 KB), against two native
# multi-pattern matchers (not project dependencies: pip install pyahocorasick hyperscan). Sixth session, machine C.
import sys, timeit, ahocorasick
sys.path.insert(0, "/work/main/bench")
from content_cost import PROMPT
from tokenward.screening import injection as inj
from tokenward.screening.folding import fold
norm, _ = fold(PROMPT)
tok = inj._tokens(norm)
padded = f" {tok} "
A = ahocorasick.Automaton()
for w in inj._FIRST_OR_HINT:
    A.add_word(f" {w} ", w)
A.make_automaton()
def t(f, n=3000): return min(timeit.repeat(f, number=n, repeat=5)) / n * 1e6
print(len(inj._FIRST_OR_HINT), "words")
print("split+isect %.2f" % t(lambda: inj._FIRST_OR_HINT.intersection(tok.split())))
print("ac iter %.2f" % t(lambda: list(A.iter(padded))))
print("ac iter_long %.2f" % t(lambda: list(A.iter_long(padded))))
print("pad %.2f" % t(lambda: f" {tok} "))
print(list(A.iter(padded))[:5])
import hyperscan, re
words = sorted(inj._FIRST_OR_HINT)
db = hyperscan.Database()
db.compile(expressions=[re.escape(f" {w} ").encode() for w in words], ids=list(range(len(words))), elements=len(words),
           flags=[0]*len(words))
scratch = hyperscan.Scratch(db)
db.scratch = scratch
bp = padded.encode()
out = []
def cb(i, a, b, flags, ctx):
    out.append((b, i))
def hs():
    out.clear()
    db.scan(padded.encode(), match_event_handler=cb)
    return out
print("hs scan %.2f" % t(hs))
print(hs()[:5])
