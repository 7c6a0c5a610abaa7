#!/usr/bin/env bash
# Installs the Debian 12 packages Pagoda needs to build, test and run.
#   scripts/install-deps.sh            everything: build, tests (Python, Node, clang/libFuzzer)
#                                      and the container tools (podman, runc, debootstrap)
#   scripts/install-deps.sh --build    only what `make build` needs (the image's build stage)
# Idempotent: only runs `apt-get update` / `apt-get install` when something is missing.
set -euo pipefail

BUILD_PACKAGES=(
  build-essential cmake pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libfmt-dev nlohmann-json3-dev libtbb-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libpcre2-dev libcpp-httplib-dev
)
# Test clients (gRPC in Python, the OpenAI SDK in Node, jinja2 for template references), the
# Neuron artifacts builder's tests (pytest, PyTorch; libtorch for the fake runtime's TorchScript
# mode),
# clang + libFuzzer for `make fuzz`, and what `make image-test` runs the image with.
TEST_PACKAGES=(
  python3 python3-grpcio python3-protobuf python3-jinja2 python3-jsonschema
  python3-pytest python3-yaml python3-numpy python3-torch libtorch-dev
  nodejs npm curl openssl clang libclang-rt-14-dev
  podman runc debootstrap
)

case "${1:-}" in
  --build) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  "") PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  -h | --help)
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "install-deps: unknown option '$1' (expected --build or nothing; see --help)" >&2
    exit 2
    ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  # NodeSource's nodejs package carries its own npm (and conflicts with Debian's).
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
