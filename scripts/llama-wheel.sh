#!/usr/bin/env bash
# Builds llama-cpp-python (the real inference server the end-to-end tests run behind the
# gateway) once, and installs it from the cached wheel on every later run.
#   - the wheel is cached outside the checkout: ${XDG_CACHE_HOME:-~/.cache}/tokenward/wheels
#   - compiled for a portable x86-64/arm64 baseline (GGML_NATIVE=OFF), so a cache shared by
#     machines with different CPUs never hands one an illegal instruction
#   - only the library is built: no llava/mtmd, no llama.cpp tools, tests or examples
#   - at -O1, not the release build's -O3: the tests' model is tiny (tests/fixtures/llama_model.py),
#     so what -O3 buys at run time is seconds (their llama.cpp tests: 46 s at -O3, 60 s at -O1,
#     one loaded run each), while it costs a third more to compile: 357 against 529 CPU
#     seconds (-O0: 332, and a slower server), measured 2026-12-07 on this 2-core VM
# With --build-only it builds (or finds) the cached wheel and installs nothing: scripts/test.sh
# starts it in the background while pip installs the rest, and installs the wheel after.
set -euo pipefail
BUILD_ONLY=0; [ "${1:-}" = "--build-only" ] && BUILD_ONLY=1
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tokenward/wheels"
PY="${PYTHON:-python3}"
mkdir -p "$CACHE"
# a ctypes binding: the wheel is tagged py3-none-<platform>, one per machine architecture
pattern="llama_cpp_python-$VERSION-*-linux_$(uname -m).whl"
wheel="$(ls "$CACHE"/$pattern 2>/dev/null | head -1 || true)"
if [ -z "$wheel" ]; then
  echo "building llama-cpp-python $VERSION once (cached in $CACHE; takes several minutes)" >&2
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  export CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DCMAKE_C_FLAGS_RELEASE=-O1 -DCMAKE_CXX_FLAGS_RELEASE=-O1 ${CMAKE_ARGS:-}"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
    -w "$tmp" "llama-cpp-python==$VERSION"
  mv "$tmp"/llama_cpp_python-*.whl "$CACHE"/
  wheel="$(ls "$CACHE"/$pattern | head -1)"
fi
[ "$BUILD_ONLY" = 1 ] && exit 0
"$PY" -m pip install -q --disable-pip-version-check "${wheel}[server]"
