#!/usr/bin/env bash
# The README's test command: installs what perld needs (Debian 12), builds the
# release, AddressSanitizer+UBSan and ThreadSanitizer configurations, and runs
# every test. Exit status 0 only when every configuration passes.
#
# Build trees: build/release (all tests, benchmarks compiled but not run),
# build/asan (Debug, contract assertions on: all tests), build/tsan (only the
# concurrency tests: labels stress and concurrency), build/fuzz (clang-14
# libFuzzer targets, each run about 30 s). ccache makes reruns cheap.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-deps.sh"

jobs="${PERLD_JOBS:-$(nproc)}"
started=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - started)); }

configure() {  # configure DIR CMAKE_ARGS...
  local dir="$1"; shift
  cmake -S "$root" -B "$root/$dir" -G Ninja -DPERLD_BUILD_TESTS=ON "$@" >/dev/null
}

step "format check (clang-format, .clang-format)"
mapfile -t sources < <(git -C "$root" ls-files '*.h' '*.cc' 2>/dev/null || find daemon tests -name '*.h' -o -name '*.cc')
clang-format --dry-run -Werror "${sources[@]}"

step "release build"
configure build/release -DCMAKE_BUILD_TYPE=Release -DPERLD_BUILD_BENCHMARKS=ON
cmake --build build/release -j "$jobs"

step "release tests"
ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 600

# The sanitizer trees keep line tables only (clang's -gline-tables-only, gcc's
# -g1): every report still names file and line, and they compile faster.
step "asan+ubsan build (clang-14, Debug: contract checks on; -Wthread-safety -Werror)"
configure build/asan -DCMAKE_BUILD_TYPE=Debug -DPERLD_SANITIZE=address -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only
cmake --build build/asan -j "$jobs"

step "asan+ubsan tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs" --timeout 900

step "tsan build (concurrency tests only)"
configure build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPERLD_SANITIZE=thread \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
cmake --build build/tsan -j "$jobs"

step "tsan tests"
ctest --test-dir build/tsan --output-on-failure -j "$jobs" --timeout 900

# -O1: libFuzzer's recommended level, and cheaper to compile than -O2.
step "fuzz build (clang-14 libFuzzer + ASan/UBSan: decoders and loaders only)"
cmake -S "$root" -B "$root/build/fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_COMPILER=clang++-14 -DPERLD_SANITIZE=fuzzer -DPERLD_BUILD_TESTS=ON \
  -DPERLD_FUZZ_SECONDS="${PERLD_FUZZ_SECONDS:-30}" >/dev/null
cmake --build build/fuzz -j "$jobs" --target fuzz_config fuzz_state fuzz_ingest fuzz_sbp fuzz_http fuzz_spool

step "fuzz runs (each target ${PERLD_FUZZ_SECONDS:-30} s from its checked-in corpus)"
ctest --test-dir build/fuzz --output-on-failure -j "$jobs" --timeout 900

step "done: all configurations passed"
