#!/usr/bin/env bash
# Installs everything perld needs to build, test and benchmark on Debian 12.
# Idempotent; must run as root (or with sudo available). Safe to re-run.
#   --build-only   only what building the release needs (the container
#                  image's build stage): no test, browser or fuzz tooling.
set -euo pipefail
BUILD_PACKAGES=(
  build-essential cmake ninja-build ccache git pkg-config dpkg-dev file
  libabsl-dev libconcurrentqueue-dev libcpp-httplib-dev libssl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libsqlite3-dev libsystemd-dev prometheus-cpp-dev zlib1g-dev
  libsnappy-dev
)
TEST_PACKAGES=(
  time procps clang clang-format clang-tidy libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev prometheus
  python3-grpcio python3-grpc-tools
  chromium chromium-driver python3-selenium
  systemd yamllint openssl fio
  libhdrhistogram-java openjdk-17-jre-headless
  victoria-metrics
)
PACKAGES=("${BUILD_PACKAGES[@]}")
if [ "${1:-}" != "--build-only" ]; then
  PACKAGES+=("${TEST_PACKAGES[@]}")
fi
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
