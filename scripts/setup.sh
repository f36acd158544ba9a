#!/usr/bin/env bash
# Installs the Debian packages nmt needs (only those missing), then configures
# and builds Release into build/. Safe to run again: it only does what is left.
#
#   scripts/setup.sh          everything: the product, the tests and what they
#                             drive (a browser, clang for the fuzzers, ...)
#   scripts/setup.sh --demo   what scripts/demo.sh runs: the build packages and
#                             the `nmt` target only, its CPU kernels for this
#                             machine's instruction set only
set -euo pipefail
cd "$(dirname "$0")/.."

demo=0
case ${1:-} in
  --demo) demo=1 ;;
  "") ;;
  *) echo "setup: unknown argument $1 (--demo, or nothing)" >&2; exit 2 ;;
esac

# What `nmt` is built from (libgtest-dev too: the one build folder is
# configured with the tests, whether or not they are built yet).
build_packages=(
  build-essential cmake ninja-build pkg-config ccache
  libtorch-dev libopenblas0-pthread libgloo-dev
  libsentencepiece-dev libyaml-cpp-dev libspdlog-dev libcli11-dev libgtest-dev nlohmann-json3-dev
  libmicrohttpd-dev zlib1g-dev
  python3
)
# What only the tests use.
test_packages=(
  python3-nltk python3-yaml              # the BLEU cross-check, the toy corpus script
  clang libclang-rt-dev                  # the libFuzzer harnesses (scripts/fuzz.sh)
  iproute2 nftables                      # the multi-host tests' network namespaces
  chromium chromium-driver python3-selenium fonts-wqy-microhei  # the explorer's browser test (tests/browser_test.py)
)
packages=("${build_packages[@]}")
((demo)) || packages+=("${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 2; }
    sudo_cmd=(sudo)
  fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build_dir=${NMT_BUILD_DIR:-build}
# The demo's build compiles the CPU kernels for this machine's instruction
# set only (NMT_KERNEL_ISAS=host: about a third of their compile time);
# the full one every copy (run-time detection with a fallback), and it turns
# a demo build folder into a full one.
isas=$( ((demo)) && echo host || echo all)
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNMT_KERNEL_ISAS="$isas" ${NMT_CMAKE_ARGS:-}
elif ((!demo)) && grep -q '^NMT_KERNEL_ISAS:STRING=host$' "$build_dir/CMakeCache.txt"; then
  cmake -S . -B "$build_dir" -DNMT_KERNEL_ISAS=all
fi
if ((demo)); then
  cmake --build "$build_dir" -j"$(nproc)" --target nmt
else
  cmake --build "$build_dir" -j"$(nproc)"
fi
