#!/usr/bin/env bash
# The README's test command: installs what perld needs (Debian 12), builds the
# release, AddressSanitizer+UBSan and ThreadSanitizer configurations, and runs
# every test. Exit status 0 only when every configuration passes.
#
# Build trees: build/release (all tests, benchmarks compiled but not run),
# build/asan (Debug, contract assertions on: all tests), build/tsan (only the
# concurrency tests: labels stress and concurrency), build/fuzz (clang-14
# libFuzzer targets, each run about 60 s). ccache makes reruns cheap.
#
# One pipeline on the machine's cores: the tests leave part of the CPU idle
# (they wait on sockets, child processes and timers; about a quarter of two
# cores in the release tests), so the sanitizer configurations build in the
# background at the lowest priority (nice 19: a test's threads always come
# first) while the previous configuration's tests run, one after another in
# the order their tests need them. Their output goes to build/<tree>.log,
# printed when the tests wait for that build.
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

# The sanitizer trees keep line tables only (-gline-tables-only, gcc's -g1):
# every report still names file and line, and they compile faster than -g.
build_asan() {
  configure build/asan -DCMAKE_BUILD_TYPE=Debug -DPERLD_SANITIZE=address \
    -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only &&
    cmake --build build/asan -j "$jobs"
}
build_tsan() {
  configure build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPERLD_SANITIZE=thread \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" &&
    cmake --build build/tsan -j "$jobs"
}
build_fuzz() {
  configure build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
    -DPERLD_SANITIZE=fuzzer "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
    -DPERLD_FUZZ_SECONDS="${PERLD_FUZZ_SECONDS:-60}" &&
    cmake --build build/fuzz -j "$jobs" \
      --target fuzz_config fuzz_state fuzz_ingest fuzz_sbp fuzz_http fuzz_spool
}

# Background builds: build/<tree>.status holds the exit code once done.
declare -A builder  # tree -> the background chain building it
stop_background() {
  for pid in "${builder[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap stop_background EXIT
build_in_background() {  # build_in_background TREE...: builds them in order
  local tree
  for tree in "$@"; do rm -f "build/$tree.status" "build/$tree.log"; done
  set -m  # its own process group: stop_background ends every process in it
  (
    renice -n 19 -p "$BASHPID" >/dev/null  # inherited by every compiler it starts
    for tree in "$@"; do
      rc=0
      "build_$tree" >"build/$tree.log" 2>&1 || rc=$?
      echo "$rc" >"build/$tree.status"
      [ "$rc" -eq 0 ] || exit "$rc"
    done
  ) &
  for tree in "$@"; do builder[$tree]=$!; done
  set +m
}
wait_for_build() {  # wait_for_build TREE: prints its log; fails when it failed
  local tree="$1"
  until [ -f "build/$tree.status" ]; do
    if ! kill -0 "${builder[$tree]}" 2>/dev/null && [ ! -f "build/$tree.status" ]; then
      cat "build/$tree.log" 2>/dev/null || true
      echo "the $tree build stopped before it finished" >&2
      exit 1
    fi
    sleep 2
  done
  cat "build/$tree.log"
  local rc
  rc="$(cat "build/$tree.status")"
  if [ "$rc" -ne 0 ]; then
    echo "the $tree build failed (exit $rc)" >&2
    exit "$rc"
  fi
}

step "format check (clang-format, .clang-format)"
mapfile -t sources < <(git -C "$root" ls-files '*.h' '*.cc' 2>/dev/null || find daemon tests -name '*.h' -o -name '*.cc')
clang-format --dry-run -Werror "${sources[@]}"

step "release build"
configure build/release -DCMAKE_BUILD_TYPE=Release -DPERLD_BUILD_BENCHMARKS=ON
cmake --build build/release -j "$jobs"
build_in_background asan

step "release tests (the asan+ubsan build runs meanwhile, nice 19)"
ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 600

step "asan+ubsan build (clang-14, Debug: contract checks on; -Wthread-safety -Werror)"
wait_for_build asan
build_in_background tsan fuzz

step "asan+ubsan tests (the tsan and fuzz builds run meanwhile, nice 19)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs" --timeout 900

step "tsan build (concurrency tests only)"
wait_for_build tsan

step "tsan tests"
ctest --test-dir build/tsan --output-on-failure -j "$jobs" --timeout 900

step "fuzz build (clang-14 libFuzzer + ASan/UBSan: decoders and loaders only)"
wait_for_build fuzz

step "fuzz runs (each target ${PERLD_FUZZ_SECONDS:-60} s from its checked-in corpus)"
ctest --test-dir build/fuzz --output-on-failure -j "$jobs" --timeout 900

step "done: all configurations passed"
