"""Every YAML config block in README.md and docs/ passes ``tokenward check-config``, so the
docs and the code cannot drift apart.

What counts as a block: a fenced block tagged ``yaml``/``yml``, and an indented (4-space)
code block whose first line is a top-level config key (``capacity:``, ``jwt:``...).

How a block is checked: a whole config (one with ``upstreams``, ``models``, ``plans`` and
``tenants``) as it is; a fragment merged into BASE below, mapping by mapping, the block's
values winning (so ``plans: {team: {screening: standard}}`` adds to BASE's plan ``team``).
BASE has the names the docs use for their examples: upstream ``local``, model
``small-chat``, plan ``team``, tenant ``acme``. A tokenizer file on the operator's machine
(``hf:/models/...``) is pointed at a small tokenizer trained here, and an environment
variable a block names (``api_key_env: VLLM_API_KEY``) is set, as is the cache salt's secret
(``TOKENWARD_CACHE_SALT_SECRET``); nothing else is changed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tokenward.cli.main import app
from tokenward.config.schema import Config

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BASE = """
upstreams:
  local: {base_url: "http://127.0.0.1:9100/v1"}
models:
  small-chat: {upstream: local}
plans:
  team: {models: [small-chat]}
tenants:
  acme: {plan: team}
"""
WHOLE = {"upstreams", "models", "plans", "tenants"}
_TOP = "|".join(sorted(f.encode_name for f in __import__("msgspec").structs.fields(Config)))
_FENCED = re.compile(r"^```ya?ml[^\n]*\n(.*?)^```", re.S | re.M)
_INDENTED = re.compile(rf"(?:^|\n)\n((?:    (?:{_TOP}):[^\n]*\n)(?:(?:    [^\n]*|)\n)*)")


def blocks(path: Path) -> list[tuple[str, str]]:
    """(where, text) of each config block in one markdown file."""
    text = path.read_text()
    found = []
    for match in _FENCED.finditer(text):
        found.append((match.start(), match.group(1)))
    for match in _INDENTED.finditer(text):
        body = "\n".join(line[4:] for line in match.group(1).rstrip("\n").split("\n"))
        found.append((match.start(1), body + "\n"))
    rel = path.relative_to(ROOT)
    return [(f"{rel}:{text.count(chr(10), 0, start) + 1}", body) for start, body in sorted(found)]


BLOCKS = [item for path in DOCS for item in blocks(path)]


def merged(base: dict, fragment: dict) -> dict:
    out = dict(base)
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def _env_names(value: object) -> list[str]:
    if isinstance(value, dict):
        return [v for k, v in value.items() if str(k).endswith("_env") and isinstance(v, str)] + [
            name for v in value.values() for name in _env_names(v)]
    if isinstance(value, list):
        return [name for v in value for name in _env_names(v)]
    return []


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(["a gateway admits work, not requests"] * 10, trainer)
    path = tmp_path_factory.mktemp("docs-hf") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def test_the_docs_have_config_blocks_to_check():
    where = {w.split(":")[0] for w, _ in BLOCKS}
    assert {"docs/screening.md", "docs/cache.md", "docs/budget.md", "docs/identity.md"} <= where, where


@pytest.mark.parametrize("where,text", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_a_docs_block_passes_check_config(where, text, tmp_path, tokenizer_file, monkeypatch):
    for name in ("TOKENWARD_STORE_URL", "TOKENWARD_KEYSTORE_URL"):
        monkeypatch.delenv(name, raising=False)
    text = re.sub(r'hf:[^"\s]+', f"hf:{tokenizer_file}", text)
    block = yaml.safe_load(text)
    assert isinstance(block, dict), f"{where}: not a mapping"
    for name in _env_names(block):
        monkeypatch.setenv(name, "set-by-the-docs-test")
    # the salt secret's default variable, which an upstream with cache_salt: tenant reads unnamed
    monkeypatch.setenv("TOKENWARD_CACHE_SALT_SECRET", "0f" * 32)
    config = block if WHOLE <= block.keys() else merged(yaml.safe_load(BASE), block)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = CliRunner().invoke(app, ["check-config", str(path)])
    assert result.exit_code == 0, f"{where}: {result.output}"
