#!/usr/bin/env bash
# Builds llama-cpp-python (the real inference server the end-to-end tests run behind the
# gateway) once, and installs it from the cached wheel on every later run.
#   - the wheel is cached outside the checkout: ${XDG_CACHE_HOME:-~/.cache}/tokenward/wheels
#   - compiled for a portable x86-64/arm64 baseline (GGML_NATIVE=OFF), so a cache shared by
#     machines with different CPUs never hands one an illegal instruction
#   - only the library is built: no llava/mtmd, no llama.cpp tools, tests or examples
#     (about 4-6 minutes on two cores, against ~8 with everything)
set -euo pipefail
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
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF ${CMAKE_ARGS:-}"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
    -w "$tmp" "llama-cpp-python==$VERSION"
  mv "$tmp"/llama_cpp_python-*.whl "$CACHE"/
  wheel="$(ls "$CACHE"/$pattern | head -1)"
fi
"$PY" -m pip install -q --disable-pip-version-check "${wheel}[server]"
