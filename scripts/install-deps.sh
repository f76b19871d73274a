#!/usr/bin/env bash
# Installs everything perld needs to build, test and benchmark on Debian 12.
# Idempotent; must run as root (or with sudo available). Safe to re-run.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build ccache git time procps
  clang clang-format clang-tidy libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libabsl-dev
  libconcurrentqueue-dev libcpp-httplib-dev prometheus
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libsqlite3-dev libsystemd-dev pkg-config
  python3-grpcio python3-grpc-tools
  chromium chromium-driver python3-selenium
  systemd dpkg-dev yamllint openssl libssl-dev
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
