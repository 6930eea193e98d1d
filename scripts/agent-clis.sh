#!/usr/bin/env bash
# Installs the coding agents that tests/e2e/test_agent_clis.py runs through the gateway:
# Claude Code and the Codex CLI, at the versions pinned in scripts/agent-clis/package.json
# (and its lock file), from npm, with Debian's nodejs and npm when node is missing.
#   - installed outside the checkout: ${XDG_CACHE_HOME:-~/.cache}/tokenward/npm/agent-clis
#     (about 660 MB: each package ships its native binary for every Linux libc); a second run
#     finds the same pins there and takes well under a second
#   - the tests find them there (tests/fixtures/agent_clis.py) or at TOKENWARD_AGENT_CLIS
set -euo pipefail
cd "$(dirname "$0")/.."
PINS="scripts/agent-clis"
DEST="${TOKENWARD_AGENT_CLIS:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenward/npm/agent-clis}"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "installing nodejs and npm (Debian)" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

if cmp -s "$PINS/package-lock.json" "$DEST/package-lock.json" \
    && [ -x "$DEST/node_modules/.bin/claude" ] && [ -x "$DEST/node_modules/.bin/codex" ]; then
  exit 0
fi
echo "installing Claude Code and the Codex CLI into $DEST (npm, once)" >&2
mkdir -p "$(dirname "$DEST")"
tmp="$(mktemp -d "$DEST.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$PINS/package.json" "$PINS/package-lock.json" "$tmp/"
# ci: exactly the lock file's versions; the packages' postinstall puts the native binary in place
(cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error >&2)
"$tmp/node_modules/.bin/claude" --version >/dev/null
"$tmp/node_modules/.bin/codex" --version >/dev/null
rm -rf "$DEST"
mv "$tmp" "$DEST"
trap - EXIT
