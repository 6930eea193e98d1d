#!/usr/bin/env bash
# Installs the agent software the end-to-end tests run through the gateway, from npm, with
# Debian's nodejs and npm when node is missing, each set at the versions pinned in its
# package.json and lock file:
#   - scripts/agent-clis: Claude Code and the Codex CLI (tests/e2e/test_agent_clis.py), into
#     ${XDG_CACHE_HOME:-~/.cache}/tokenward/npm/agent-clis (or TOKENWARD_AGENT_CLIS); about
#     660 MB: each package ships its native binary for every Linux libc
#   - scripts/vercel-ai: the Vercel AI SDK (`ai`, `@ai-sdk/anthropic`, `@ai-sdk/openai`;
#     tests/e2e/test_vercel_ai_sdk.py), into .../tokenward/npm/vercel-ai (or
#     TOKENWARD_VERCEL_AI); about 36 MB
# Both outside the checkout; a second run finds the same pins there and takes well under a
# second. The tests find them there (tests/fixtures/agent_clis.py, test_vercel_ai_sdk.py).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tokenward/npm"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "installing nodejs and npm (Debian)" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# install_pins PINS DEST WHAT CHECK...: `npm ci` of the lock file in PINS into DEST, unless
# DEST already holds that lock file and every CHECK path; then `--version` of each binary
# among the CHECK paths (node_modules/.bin/*) before DEST is replaced
install_pins() {
  local pins="$1" dest="$2" what="$3"; shift 3
  local ready=1 path
  cmp -s "$pins/package-lock.json" "$dest/package-lock.json" || ready=0
  for path in "$@"; do [ -e "$dest/$path" ] || ready=0; done
  [ "$ready" = 1 ] && return 0
  echo "installing $what into $dest (npm, once)" >&2
  mkdir -p "$(dirname "$dest")"
  local tmp
  tmp="$(mktemp -d "$dest.tmp.XXXXXX")"
  trap "rm -rf '$tmp'" EXIT     # expanded now: the trap may run after this function returned
  cp "$pins/package.json" "$pins/package-lock.json" "$tmp/"
  # ci: exactly the lock file's versions; a package's postinstall puts its native binary in place
  (cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error >&2)
  for path in "$@"; do
    case "$path" in node_modules/.bin/*) "$tmp/$path" --version >/dev/null ;; esac
  done
  rm -rf "$dest"
  mv "$tmp" "$dest"
  trap - EXIT
}

install_pins scripts/agent-clis "${TOKENWARD_AGENT_CLIS:-$CACHE/agent-clis}" "Claude Code and the Codex CLI" \
  node_modules/.bin/claude node_modules/.bin/codex
install_pins scripts/vercel-ai "${TOKENWARD_VERCEL_AI:-$CACHE/vercel-ai}" "the Vercel AI SDK" \
  node_modules/ai/package.json node_modules/@ai-sdk/anthropic/package.json node_modules/@ai-sdk/openai/package.json
