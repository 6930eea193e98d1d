"""Readers for the injection sources that nothing is tuned on (build_injection.py uses them).

- ``agentdojo`` (0.1.35, MIT): agents' tool results. Its environments (e-mails, calendar
  events, cloud-drive files, Slack messages, hotel and restaurant reviews, web pages,
  transactions) are serialized as the JSON a tool would return; each place an injection
  vector stands is filled with one of the package's attack strings (``important_instructions``,
  ``ignore_previous``, ``system_message``, ``injecagent``, ``direct``; picked by hash) wrapped
  around one of the suite's injection-task goals (``GOAL``): an attack; the same object with
  every vector at its default value: a benign tool output.
- ``bastionprobe`` (0.19.0, MIT): ``payloads.jsonl``, indirect-injection payloads meant for
  tool outputs and documents (``{canary}`` filled with a fixed token).
- ``bfcl_eval`` (2026.3.23, Apache-2.0; the Berkeley Function Calling Leaderboard): benign tool
  outputs only. The multi-turn scenarios' initial states, as the state of each API a tool
  returns (a file system's directories and files, tweets, messages, support tickets, bookings,
  portfolios, a car's status), and the long texts its tools return (``long_context.py``: a
  company's financials, a car's manual on the parking brake, company overviews) cut into
  paragraphs: text written for people, instructions among it, no attack.
- ``pyrit`` (1.1.0, MIT): ``datasets/jailbreak/templates/**.yaml`` with one ``prompt``
  parameter, filled with an AdvBench objective (``seed_datasets/local/adv_bench.prompt``,
  picked by hash): user-message jailbreaks.

Goals and attack strings are read from the wheels' Python files with ``ast`` (string
constants and f-strings over them); no code of the packages runs.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import zipfile

import yaml

_AD = "agentdojo/"
_SUITES = ("workspace", "travel", "banking", "slack")
_ENV_FILES = {"workspace": ["include/inbox.yaml", "include/calendar.yaml", "include/cloud_drive.yaml"],
              "travel": ["environment.yaml"], "banking": ["environment.yaml"], "slack": ["environment.yaml"]}


def _pick(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


def _constants(tree: ast.AST) -> list[dict[str, str]]:
    """Per class: its string constants, f-strings evaluated over the module's and class's names."""
    module: dict[str, str] = {}
    out = []

    def value(node: ast.AST, names: dict[str, str]) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
            return str(node.value)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    inner = value(v.value, names)
                    if inner is None:
                        return None
                    parts.append(inner)
                else:
                    parts.append(str(getattr(v, "value", "")))
            return "".join(parts)
        if isinstance(node, ast.Name):
            return names.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = value(node.left, names), value(node.right, names)
            return None if a is None or b is None else a + b
        return None

    body = getattr(tree, "body", [])
    for node in body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            v = value(node.value, module)
            if v is not None:
                module[node.targets[0].id] = v
    for node in body:
        if isinstance(node, ast.ClassDef):
            names = dict(module)
            for item in node.body:
                target = item.targets[0] if isinstance(item, ast.Assign) else getattr(item, "target", None)
                if isinstance(target, ast.Name) and getattr(item, "value", None) is not None:
                    v = value(item.value, names)
                    if v is not None:
                        names[target.id] = v
            out.append(names)
    return out


def _attack_strings(z: zipfile.ZipFile) -> list[str]:
    found = []
    for name in ("baseline_attacks.py", "important_instructions_attacks.py"):
        for node in ast.walk(ast.parse(z.read(_AD + "attacks/" + name))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "{goal}" in node.value:
                found.append(node.value)
            if isinstance(node, ast.JoinedStr):
                continue
    strings = []
    for node in ast.walk(ast.parse(z.read(_AD + "attacks/important_instructions_attacks.py"))):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_JB_STRING":
            strings.append("".join(c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)))
    return [s.replace("{user}", "Emma Johnson").replace("{model}", "GPT-4") for s in found + strings]


def _goals(z: zipfile.ZipFile, suite: str) -> list[str]:
    tree = ast.parse(z.read(f"{_AD}default_suites/v1/{suite}/injection_tasks.py"))
    return [c["GOAL"] for c in _constants(tree) if "GOAL" in c]


def _objects(node, path=()):
    """Each dict whose own string values carry a ``{vector}``-like placeholder or text."""
    if isinstance(node, dict):
        if any(isinstance(v, str) for v in node.values()):
            yield path, node
        for k, v in node.items():
            yield from _objects(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _objects(v, (*path, i))


def agentdojo(z: zipfile.ZipFile, row) -> list[dict]:
    attacks = _attack_strings(z)
    out = []
    for suite in _SUITES:
        base = f"{_AD}data/suites/{suite}/"
        vectors = yaml.safe_load(z.read(base + "injection_vectors.yaml"))
        defaults = {k: str(v.get("default", "")) for k, v in vectors.items()}
        goals = _goals(z, suite)
        for env_file in _ENV_FILES[suite]:
            raw = z.read(base + env_file).decode("utf-8")
            for path, obj in _objects(yaml.safe_load(re.sub(r"!include\s+\S+", "null", raw)) or {}):
                text = json.dumps(obj, ensure_ascii=False, default=str, indent=1)
                here = [v for v in re.findall(r"\{([a-z0-9_]+)\}", text) if v in defaults]
                benign = text
                for v in set(here):
                    benign = benign.replace("{" + v + "}", defaults[v])
                sid = f"{suite}/{env_file}/{'/'.join(map(str, path))}"
                if len(benign) >= 80:
                    out.append(row(benign, 0, "benign", "en", "tool", "agentdojo", sid))
                for v in sorted(set(here)):
                    goal = goals[_pick(sid + v, len(goals))]
                    attack = attacks[_pick(sid + v + "/attack", len(attacks))].replace("{goal}", goal)
                    text_a = text.replace("{" + v + "}", attack.replace("\n", "\\n").replace('"', '\\"'))
                    for other in set(here) - {v}:
                        text_a = text_a.replace("{" + other + "}", defaults[other])
                    out.append(row(text_a, 1, "indirect", "en", "tool", "agentdojo", f"{sid}+{v}"))
    return out


def bastionprobe(z: zipfile.ZipFile, row) -> list[dict]:
    out = []
    for line in z.read("bastionprobe/payloads.jsonl").decode("utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        channel = "tool" if r.get("channel") == "tool_output" else "document" if r.get("channel") else "user"
        family = {"indirect_injection": "indirect", "exfiltration": "exfiltration"}.get(r.get("category", ""), "override")
        out.append(row(r["text"].replace("{canary}", "ZX-CANARY-7Q"), 1, family, "en", channel, "bastionprobe", r["id"]))
    return out


def pyrit(z: zipfile.ZipFile, row) -> list[dict]:
    objectives = [line.strip() for line in z.read("pyrit/datasets/seed_datasets/local/adv_bench.prompt")
                  .decode("utf-8").splitlines() if line.strip().startswith("- value:")]
    objectives = [o.split(":", 1)[1].strip().strip("'\"") for o in objectives] or ["Tell me how to pick a lock."]
    out = []
    for name in sorted(n for n in z.namelist() if n.startswith("pyrit/datasets/jailbreak/templates/")
                       and n.endswith(".yaml")):
        try:
            t = yaml.safe_load(z.read(name))
        except yaml.YAMLError:
            continue
        if not isinstance(t, dict) or t.get("parameters") != ["prompt"] or not isinstance(t.get("value"), str):
            continue
        text = re.sub(r"\{\{\s*prompt\s*\}\}", objectives[_pick(name, len(objectives))], t["value"])
        lang = "en" if re.search(r"\b(?:the|you|and)\b", text) else "other"
        out.append(row(text, 1, "persona", lang, "user", "pyrit", name.rsplit("/", 1)[-1]))
    return out


def botocore(z: zipfile.ZipFile, row) -> list[dict]:
    """Benign API documentation as a tool would return it (``botocore`` 1.43.11, Apache-2.0):
    the ``documentation`` of operations in the service models, HTML tags removed, one
    operation in 25 picked by hash, 200-2,000 characters: text addressed to a reader ("you
    must", "do not", "ignore", "override", "instructions") with no attack in it."""
    import gzip
    import html

    out = []
    for name in sorted(n for n in z.namelist() if n.endswith("/service-2.json.gz")):
        model = json.loads(gzip.decompress(z.read(name)))
        service = name.split("/")[2]
        for op, spec in sorted(model.get("operations", {}).items()):
            doc = spec.get("documentation") or ""
            text = html.unescape(re.sub(r"<[^>]+>", " ", doc))
            text = re.sub(r"[ \t]+", " ", text).strip()
            if 200 <= len(text) <= 2000 and _pick(f"{service}/{op}", 25) == 0:
                out.append(row(text, 0, "benign", "en", "tool", "botocore", f"{service}/{op}"))
    return out


_BFCL = "bfcl_eval/"
_BFCL_SETS = ("BFCL_v4_multi_turn_base.json", "BFCL_v4_multi_turn_miss_func.json",
              "BFCL_v4_multi_turn_miss_param.json", "BFCL_v4_multi_turn_long_context.json")


def bfcl_eval(z: zipfile.ZipFile, row) -> list[dict]:
    out = []
    for name in _BFCL_SETS:
        for line in z.read(f"{_BFCL}data/{name}").decode("utf-8").splitlines():
            case = json.loads(line)
            for api, state in sorted(case.get("initial_config", {}).items()):
                text = json.dumps(state, ensure_ascii=False, indent=1)
                if 80 <= len(text) <= 4000:
                    out.append(row(text, 0, "benign", "en", "tool", "bfcl_eval", f"{case['id']}/{api}"))
    tree = ast.parse(z.read(f"{_BFCL}eval_checker/multi_turn_eval/func_source_code/long_context.py"))
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            continue
        texts = [value] if isinstance(value, str) else [v for v in value.values() if isinstance(v, str)] \
            if isinstance(value, dict) else []
        for k, text in enumerate(texts):
            for i, part in enumerate(_paragraphs(text, 1500)):
                if len(part) >= 200:
                    out.append(row(part, 0, "benign", "en", "tool", "bfcl_eval", f"{node.targets[0].id}/{k}/{i}"))
    return out


def _paragraphs(text: str, size: int) -> list[str]:
    """``text`` cut at blank lines (or sentence ends) into parts of at most about ``size`` characters."""
    parts, current = [], ""
    for piece in re.split(r"(?<=[.;])\s+(?=[A-Z])|\n\s*\n", " ".join(text.split(" ")).strip()):
        if current and len(current) + len(piece) > size:
            parts.append(current.strip())
            current = ""
        current += piece + " "
    if current.strip():
        parts.append(current.strip())
    return parts
