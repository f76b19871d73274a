"""The C++ benchmark binaries must not rot (issue 32): each one run once at
tiny sizes, for CI. Nothing is timed or judged; a binary fails the smoke when
it exits non-zero, prints nothing, or reports an error.

  Google Benchmark binaries (clock_bench, crc32c_bench, queue_bench, recorder_bench,
  response_view_bench, decode_batch_bench, channel_sides_bench, client_record_bench,
  metrics_bench):
  --benchmark_min_time=0.01, and where the whole set is slow a filter that
  still runs every benchmark family once; each must report at least one
  benchmark and no error (BM_ClockTsc may skip: whether the kernel trusts the
  TSC is the machine's, not the code's).
  query_latency: GetPercentiles calls against a real perld (127.0.0.1 port 0)
  on an exact bench run; every call answered, the run's records exact.
  ingest_bench: raw and windows mode for a fraction of a second against the
  same perld; the run's total exact (the binary checks it).
  spool_bench: 64-byte records, 0.05 s per step, 2,000 records iterated, no
  page-cache drop.
  total_merge_bench: 3 total segments of 2,000 distinct latencies, one merge
  checked against the in-memory merge (the binary checks it), and its
  --breakdown.

  /usr/bin/python3 tests/bench/bench_smoke.py --perld build/release/daemon/bench/perld \
      --perlctl build/release/client/perlctl/perlctl build/release/tests/bench/*_bench \
      build/release/tests/bench/query_latency
Binaries are named on the command line (by their path; the file name says
which is which); one that is not given is not run.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from perld_it import Daemon  # noqa: E402

# Google Benchmark binary -> the filter of its smoke run (None: all of them).
GBENCH = {
    "clock_bench": None,
    "crc32c_bench": None,
    # Throughput runs a fixed 20 x 200,000 items per producer: one producer
    # of each implementation.
    "queue_bench": "^RoundTrip/|/producers:1/",
    "recorder_bench": None,
    "response_view_bench": None,
    "decode_batch_bench": None,
    # Every path and both sides, one topology (the shared one is slow here).
    "channel_sides_bench": "shared:0",
    "client_record_bench": None,
    "metrics_bench": None,
}
# Benchmarks allowed to skip with an error: the machine's, not the code's.
MAY_SKIP = {"BM_ClockTsc", "BM_RawRdtsc"}
COMMANDS = ("query_latency", "ingest_bench", "spool_bench", "total_merge_bench")

failures = []


def run(name, cmd, timeout=120):
    """Runs cmd, echoes its output; returns (stdout, seconds) or None on failure."""
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        failures.append(f"{name}: no exit within {timeout} s")
        print(f"FAIL {name}: no exit within {timeout} s", flush=True)
        return None
    seconds = time.monotonic() - t0
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr[-4000:])
    if p.returncode != 0 or not p.stdout.strip():
        failures.append(f"{name}: exit {p.returncode}, {len(p.stdout)} bytes of output")
        print(f"FAIL {name}: exit {p.returncode}, {len(p.stdout)} bytes of output", flush=True)
        return None
    print(f"-- {name}: {seconds:.1f} s", flush=True)
    return p.stdout, seconds


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL {what}", flush=True)


def gbench(path, tmp):
    name = os.path.basename(path)
    out = os.path.join(tmp, name + ".json")
    cmd = [path, "--benchmark_min_time=0.01", f"--benchmark_out={out}",
           "--benchmark_out_format=json"]
    if GBENCH[name]:
        cmd.append(f"--benchmark_filter={GBENCH[name]}")
    if run(name, cmd) is None:
        return
    with open(out) as f:
        results = json.load(f)["benchmarks"]
    check(len(results) > 0, f"{name}: no benchmark ran")
    for r in results:
        if r.get("error_occurred"):
            family = r["name"].split("/")[0]
            check(family in MAY_SKIP, f"{name}: {r['name']}: {r.get('error_message')}")


def daemon_commands(binaries, perld, perlctl, tmp):
    d = Daemon(perld, os.path.join(tmp, "state"))
    try:
        if "query_latency" in binaries:
            records = 100_000
            started = subprocess.run([perlctl, "--target", d.grpc, "--json", "bench",
                                      "-writers", "1", "-size", "1024", "-records",
                                      str(records), "-time", "ns", "--name", "smoke", "--wait"],
                                     capture_output=True, text=True)
            check(started.returncode == 0, f"perlctl bench: exit {started.returncode} "
                  f"{started.stderr[-1000:]}")
            if started.returncode == 0:  # the run has ended: its total is final
                got = run("query_latency", [binaries["query_latency"], "--target", d.grpc,
                                            "--run", "smoke", "--calls", "50"])
                if got:
                    m = re.search(r"calls=(\d+) errors=(\d+) valid_records=(\d+)", got[0])
                    check(m is not None and m.groups() == ("50", "0", str(records)),
                          f"query_latency: 50 calls, 0 errors, {records} records expected")
        if "ingest_bench" in binaries:
            for mode in ("raw", "windows"):
                got = run(f"ingest_bench {mode}",
                          [binaries["ingest_bench"], "--target", d.grpc, "--mode", mode,
                           "--seconds", "0.3", "--server-pid", str(d.proc.pid)])
                check(got is not None and "(exact)" in got[0],
                      f"ingest_bench {mode}: the run's total not exact")
    finally:
        rc = d.stop()
    check(rc == 0, f"perld: SIGTERM exit {rc}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", help="for query_latency and ingest_bench")
    ap.add_argument("--perlctl", help="for query_latency's run")
    ap.add_argument("binaries", nargs="+", help="benchmark binaries (by path)")
    args = ap.parse_args()
    binaries = {}
    for path in args.binaries:
        name = os.path.basename(path)
        if name not in GBENCH and name not in COMMANDS:
            ap.error(f"unknown benchmark binary {path}")
        binaries[name] = path
    if ("query_latency" in binaries or "ingest_bench" in binaries) and not args.perld:
        ap.error("--perld is required for query_latency and ingest_bench")
    if "query_latency" in binaries and not args.perlctl:
        ap.error("--perlctl is required for query_latency")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="perld-bench-smoke-") as tmp:
        for name, path in binaries.items():
            if name in GBENCH:
                gbench(path, tmp)
        if "spool_bench" in binaries:
            got = run("spool_bench", [binaries["spool_bench"], "--dir", tmp, "--seconds", "0.05",
                                      "--records", "2000", "--size", "64", "--cold", "0"])
            check(got is not None and "| page cache warm |" in got[0] and
                  "| synced |" in got[0], "spool_bench: its tables incomplete")
        if "total_merge_bench" in binaries:
            got = run("total_merge_bench",
                      [binaries["total_merge_bench"], "--segments", "3", "--distinct", "2000",
                       "--repeat", "1", "--verify", "--breakdown",
                       "--dir", os.path.join(tmp, "total_merge")])
            check(got is not None and
                  re.search(r"^total_merge segments=3 distinct=2000 .* verify=on .*result=ok$",
                            got[0], re.M) is not None,
                  "total_merge_bench: no verified summary line")
        if "query_latency" in binaries or "ingest_bench" in binaries:
            daemon_commands(binaries, args.perld, args.perlctl, tmp)
    print(f"\n{len(binaries)} benchmark binaries in {time.monotonic() - t0:.1f} s")
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
