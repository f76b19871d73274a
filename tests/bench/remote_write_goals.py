#!/usr/bin/env python3
"""Prometheus remote write's goals, measured (issue 29). A benchmark command,
not a test.

  tests/bench/remote_write_goals.py --build build/release [--runs 100] [--seconds 60]
                                    [--outage 60]

1. Cost: a daemon with --runs running runs (each one rate-controlled writer,
   1024 records/s, ns, the 28 default percentiles, reportingIntervalMs 5000:
   every run publishes a window between two collections, so every collection
   re-renders every run) and remoteWrite every 5000 ms to a loopback sink (a
   Python HTTP server answering 204; its own CPU is not perld's). Over
   --seconds, the CPU time of remote write's two threads (perld-rw-coll:
   render + parse /metrics; perld-rw-send: encode, snappy, HTTP), from
   /proc/PID/task/TID/stat and from perld_remote_write_cpu_seconds_total
   (CLOCK_THREAD_CPUTIME_ID), as a share of one core. Goal: < 2%.
2. Outage: the sink answers 503 for --outage seconds, then 204 again: every
   sample collected meanwhile is sent once the receiver is back (sent ==
   collected, nothing dropped) while the queue (the default
   maxQueuedSamples, 500,000) holds them. Goal: nothing lost within the bound.
Prints a Markdown table.

  --smoke (CI): 3 runs, 6 s, a 3 s outage, intervalMs 1000; the script works.
"""
import argparse
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from goals_daemon import Daemon, print_table  # noqa: E402

MEMORY_BYTES = 1 << 50  # limits.maxMemoryBytes: many light paced runs (as metrics_goals.py)


class Sink:
    """A remote-write receiver that takes every request (204) unless down (503)."""

    def __init__(self):
        self.down = False
        self.requests = self.bytes = self.refused = 0
        self.lock = threading.Lock()
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 (http.server's name)
                n = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(n)
                with sink.lock:
                    if sink.down:
                        sink.refused += 1
                        status = 503
                    else:
                        sink.requests += 1
                        sink.bytes += n
                        status = 204
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v1/write"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def metrics(d):
    with urllib.request.urlopen(f"http://{d.http}/metrics", timeout=10) as r:
        return r.read().decode()


def value(text, name, labels=""):
    for m in re.finditer(r"^" + re.escape(name) + r"(\{[^}]*\})? (\S+)$", text, re.M):
        if labels in (m.group(1) or ""):
            return float(m.group(2))
    return 0.0


def thread_cpu(pid):
    """{thread name: CPU seconds} of remote write's threads, from /proc."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if name.startswith("perld-rw-"):
            fields = stat.rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def start_runs(d, perlctl, runs):
    for i in range(runs):
        subprocess.run([perlctl, "--target", d.grpc, "--json", "bench", "-writers", "1",
                        "-size", "1024", "-throughput", "1", "-seconds", "3600", "-time", "ns",
                        "--name", f"paced-{i}"], capture_output=True, text=True, check=True)


def wait_collections(d, n, limit):
    deadline = time.time() + limit
    while time.time() < deadline:
        text = metrics(d)
        if value(text, "perld_remote_write_collections_total") >= n:
            return text
        time.sleep(0.2)
    return metrics(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--outage", type=float, default=60)
    ap.add_argument("--interval-ms", type=int, default=5000)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.seconds, args.outage, args.interval_ms = 3, 6, 3, 1000
    perld = os.path.join(args.build, "daemon/bench/perld")
    perlctl = os.path.join(args.build, "client/perlctl/perlctl")
    sink = Sink()
    rows = []
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write(f"reportingIntervalMs: 5000\nlimits:\n  maxRunningRuns: {args.runs + 8}\n"
                    f"  maxMemoryBytes: {MEMORY_BYTES}\n"
                    f"prometheus:\n  maxRuns: {args.runs + 8}\n"
                    f"remoteWrite:\n  url: {sink.url}\n  intervalMs: {args.interval_ms}\n")
        d = Daemon(perld, os.path.join(tmp, "state"), config)
        try:
            start_runs(d, perlctl, args.runs)
            time.sleep(6)  # every run has closed a window
            text = wait_collections(d, value(metrics(d), "perld_remote_write_collections_total")
                                    + 1, 2 * args.interval_ms / 1000 + 5)
            # 1. Cost over --seconds.
            c0, s0, r0 = (value(text, "perld_remote_write_collections_total"),
                          value(text, "perld_remote_write_samples_sent_total"), sink.requests)
            m0 = {t: value(text, "perld_remote_write_cpu_seconds_total", f'thread="{t}"')
                  for t in ("collect", "send")}
            p0, t0, d0 = thread_cpu(d.proc.pid), time.perf_counter(), d.cpu_seconds()
            b0 = sink.bytes
            time.sleep(args.seconds)
            p1, t1, d1 = thread_cpu(d.proc.pid), time.perf_counter(), d.cpu_seconds()
            text = metrics(d)
            wall = t1 - t0
            m1 = {t: value(text, "perld_remote_write_cpu_seconds_total", f'thread="{t}"')
                  for t in ("collect", "send")}
            collections = value(text, "perld_remote_write_collections_total") - c0
            sent = value(text, "perld_remote_write_samples_sent_total") - s0
            requests = sink.requests - r0
            running = len(re.findall(r'^perld_run_info\{[^}]*state="running"', text, re.M))
            quantiles = len(re.findall(r'^perld_run_latency_seconds\{[^}]*run="paced-0"[^}]*'
                                       r'quantile=', text, re.M))
            proc_cpu = sum(p1.get(k, 0) - p0.get(k, 0) for k in p1)
            clock_cpu = sum(m1[t] - m0[t] for t in m1)
            share = clock_cpu / wall * 100
            rows.append(("runs exported (running) x quantiles per summary",
                         f"{running} x {quantiles}", f"{args.runs} x 28"))
            per = sent / collections if collections else 0
            rows.append((f"remote write over {wall:.0f} s (intervalMs {args.interval_ms})",
                         f"{collections:.0f} collections, {per:,.0f} samples each; "
                         f"{requests} requests, {(sink.bytes - b0) / max(requests, 1) / 1024:.0f}"
                         f" KiB each (snappy)", ""))
            rows.append(("CPU of remote write's threads (CLOCK_THREAD_CPUTIME_ID)",
                         f"{share:.2f}% of a core (collect {(m1['collect'] - m0['collect']) / wall * 100:.2f}%, "
                         f"send {(m1['send'] - m0['send']) / wall * 100:.2f}%)", "< 2%"))
            rows.append(("same from /proc/PID/task/TID/stat (10 ms ticks)",
                         f"{proc_cpu / wall * 100:.2f}% of a core", "< 2%"))
            rows.append(("the whole daemon meanwhile (100 paced runs' recorder, workers, ...)",
                         f"{(d1 - d0) / wall * 100:.1f}% of a core", ""))
            ok = ok and share < 2 and running == args.runs

            # 2. Outage.
            text = metrics(d)
            col0 = value(text, "perld_remote_write_samples_collected_total")
            sink.down = True
            time.sleep(args.outage)
            during = metrics(d)
            queued = value(during, "perld_remote_write_queue_samples")
            sink.down = False
            deadline = time.time() + 120
            while time.time() < deadline:
                text = metrics(d)
                if value(text, "perld_remote_write_queue_samples") == 0:
                    break
                time.sleep(0.2)
            collected = value(text, "perld_remote_write_samples_collected_total")
            sent_all = value(text, "perld_remote_write_samples_sent_total")
            dropped = sum(value(text, "perld_remote_write_samples_dropped_total",
                                f'reason="{r}"') for r in ("queue_full", "rejected", "shutdown"))
            lost = collected - sent_all - value(text, "perld_remote_write_queue_samples")
            rows.append((f"receiver answering 503 for {args.outage:.0f} s",
                         f"{queued:,.0f} samples queued at its end ({collected - col0:,.0f} "
                         f"collected since it began), {sink.refused} requests refused, "
                         f"{value(text, 'perld_remote_write_retries_total'):.0f} retries", ""))
            rows.append(("after it: samples collected - sent - queued; dropped",
                         f"{lost:.0f}; {dropped:.0f}", "0; 0"))
            ok = ok and lost == 0 and dropped == 0
        finally:
            d.stop()
    print_table(rows)
    print("PASSED" if ok or args.smoke else "GOAL MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
