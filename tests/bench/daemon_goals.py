#!/usr/bin/env python3
"""The daemon's goals, measured (issue 8). A benchmark command, not a test.

  tests/bench/daemon_goals.py --build build/release [--idle-seconds 60] [--rounds 5]

1. Idle: a daemon with no runs, CPU time (utime + stime from /proc) over
   --idle-seconds after a 3 s settle, and its resident memory (VmRSS, VmHWM).
2. In-daemon bench vs standalone: `perld bench` and the same options through
   `perlctl bench --wait` against a daemon, alternating, --rounds each; the
   records/s of each run's total, medians and the per-pair ratio.
3. GetPercentiles latency while a bench runs at full speed in the daemon:
   tests/bench/query_latency against the running run.
Prints a Markdown table; writes nothing else.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from goals_daemon import (Daemon, daemon_bench_rate, print_table,  # noqa: E402
                          query_latency_under_load)

BENCH = ["-writers", "1", "-size", "1024", "-records", "20000000", "-time", "ns"]


def standalone_rate(perld):
    out = subprocess.run([perld, "bench", *BENCH, "--progress", "false", "-interval", "3600"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"^Total PerlBench .*?(\d+) records,\s+([\d.]+) records/sec", out, re.M)
    return float(m.group(2))


def daemon_rate(perlctl, target):
    return daemon_bench_rate(perlctl, target, BENCH + ["-interval", "3600"], 20000000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--idle-seconds", type=float, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    perld = os.path.join(args.build, "daemon/bench/perld")
    perlctl = os.path.join(args.build, "client/perlctl/perlctl")
    query = os.path.join(args.build, "tests/bench/query_latency")
    rows = []
    with tempfile.TemporaryDirectory() as state:
        d = Daemon(perld, state)
        time.sleep(3)
        c0 = d.cpu_seconds()
        time.sleep(args.idle_seconds)
        c1 = d.cpu_seconds()
        mem = d.memory_kib()
        rows.append(("idle daemon CPU", f"{100 * (c1 - c0) / args.idle_seconds:.2f}% of a core "
                     f"over {args.idle_seconds:.0f} s", "< 1%"))
        rows.append(("idle daemon memory", f"VmRSS {mem['VmRSS'] / 1024:.1f} MiB, "
                     f"VmHWM {mem['VmHWM'] / 1024:.1f} MiB", "< 32 MiB"))

        alone, inside, ratios = [], [], []
        for _ in range(args.rounds):
            a = standalone_rate(perld)
            b = daemon_rate(perlctl, d.grpc)
            alone.append(a)
            inside.append(b)
            ratios.append(b / a)
        rows.append(("standalone `perld bench` (1 writer, 20 M, ns)",
                     f"median {statistics.median(alone) / 1e6:.2f} M records/s "
                     f"(min {min(alone) / 1e6:.2f}, max {max(alone) / 1e6:.2f})", ""))
        rows.append(("same through `perlctl bench` in the daemon",
                     f"median {statistics.median(inside) / 1e6:.2f} M records/s "
                     f"(min {min(inside) / 1e6:.2f}, max {max(inside) / 1e6:.2f})", ""))
        rows.append(("in-daemon / standalone, per pair",
                     f"median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, "
                     f"max {max(ratios):.3f})", ">= 0.9"))

        q = query_latency_under_load(perlctl, query, d.grpc, 5000)
        rows.append(("GetPercentiles (total, 4 percentiles) during a full-speed bench",
                     f"p50 {q['p50']} us, p99 {q['p99']} us, max {q['max']} us", "p99 < 1 ms"))
        rc = d.stop()
        rows.append(("SIGTERM", f"exit {rc}", "0"))
    print_table(rows)


if __name__ == "__main__":
    sys.exit(main())
