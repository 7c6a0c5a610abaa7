#!/usr/bin/env bash
# Installs the Debian 12 packages Pagoda needs to build, test and run.
# Idempotent: only runs `apt-get update` / `apt-get install` when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libfmt-dev nlohmann-json3-dev libtbb-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libpcre2-dev libcpp-httplib-dev
  python3 python3-grpcio python3-protobuf python3-jinja2
  nodejs npm curl
)

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
