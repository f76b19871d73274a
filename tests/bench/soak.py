#!/usr/bin/env python3
"""The daemon soak (issue 31): one perld under a steady mixed load for a
given duration, its memory, threads and CPU over time, and every run exact at
the end. A benchmark command; its --smoke is a CI test.

  /usr/bin/python3 tests/bench/soak.py --build build/release --seconds 3600 \\
      [--clients 10] [--rate 500] [--sample-seconds 10] [--out soak.csv] \\
      [--max-rss-growth PCT] [--perld-env MALLOC_ARENA_MAX=2] [--malloc-trim-ms 0]
  /usr/bin/python3 tests/bench/soak.py --build build/release --smoke   (about 35 s)

The load, all started together and all lasting --seconds:
  * --clients `perlctl load` processes (-writers 1 -size 100 -time UNIT,
    -interval 1, paced at --rate records/s each), alternately --mode raw and
    --mode windows, each with its own --spool directory, its own new run
    (--new, soak-raw-N / soak-windows-N) and its own --distribution-out
    file: the client's exact total, the truth its run is checked against.
    They stand in for other machines and run at nice --client-nice (10).
    Their CPU is mostly the PerlBench pacer's wait for each record's slot,
    not perld's: on 2026-12-06 the default ten at 500 records/s took
    0.8-1.1 cores of a 2-core host together (reported apart from perld's).
  * one in-daemon bench (`perlctl bench --wait`, 1 writer, -size 100,
    -time UNIT, -interval 1, paced at --bench-rate records/s; its --wait also
    keeps a WatchRun stream open for the whole soak); its pacing counts in
    perld's own CPU (thread perld-bench-0);
  * a scrape of /metrics every second (its latency and any failure);
  * SIGHUP to perld every --hup-seconds (60): the config file alternates
    drainTimeoutMs between 10000 and 10001, so every reload applies a change;
    perld must log each reload and answer /readyz after it.

Every --sample-seconds the script reads perld's /proc/PID/status and stat:
VmRSS, VmHWM, Threads, open file descriptors, CPU seconds (utime + stime),
plus the clients' CPU seconds and the host's load average, and from the
latest scrape what perld holds as data (data_kib: every run's recorders,
the snapshot store, the clients' breakdown, SQLite) and the rest of RSS (other_kib); one CSV row
each (--out; printed as they come). The summary compares RSS at the end of the
warm-up -- the first 10% of the soak or 300 s, whichever is smaller -- with
RSS at the last loaded sample (growth %, goal < 2%; fails only with
--max-rss-growth PCT), the same for the rest of RSS beside the data (an
exact distribution grows with every new distinct latency, by design, so a
loaded host's longer tails raise RSS without a leak), and gives the least-squares RSS slope after warm-up,
the largest rise between two samples (a step points at a bound being
reached, a slope at something that keeps growing), thread and fd ranges,
perld's average CPU in % of one core and its split by thread name
(/proc/PID/task). --perld-env KEY=VALUE runs perld with that variable, for
A/B soaks (e.g. glibc's MALLOC_ARENA_MAX).

The daemon's config keeps its steady state reachable within the warm-up:
UNIT is --time-unit, `us` by default: every run is rate-controlled, so it
keeps an exact response-time distribution (end - intended start) beside
its service times, and in ns each start lag is a new distinct latency --
those distributions grow with the values they hold for as long as new ones
come (by design, up to the total window's budget; measured 2026-12-06 with
-time ns: perld's RSS 26 -> 152 MiB over 560 s, 54 MB of it the 11 response
views' recorders), which is data, not the leak a soak looks for. In us the
values settle within the warm-up; --time-unit ns measures the growth.
Each run reports every 1 s and retention.maxWindowsPerRun is --max-windows-per-run
(20), so each run's window history reaches its bound after 20 s instead of
growing for the first 34 minutes (the default 2048); the recorders' memory
caps are lowered so 11 runs fit the runs' memory budget on a small host
(caps, not allocations: these distributions hold a few hundred latencies).

At the end (clients and bench end on their own after --seconds): every run
must be FINISHED with an exact total, and
  * each client's run: the client exited 0 with every record acknowledged;
    the daemon's total records, valid records, min and max equal the
    client's, and GetPercentiles (0, 5 ... 99.99, 99.999, 100) and the
    total's configured percentiles (GetRun) equal those computed here from
    the client's distribution (perld_it.exact_percentiles); its response
    view's records and GetPercentiles equal the client's response times;
  * the bench run: `perlctl bench --wait` exited 0 (the run recorded every
    operation, no drop, no invalid latency); its exported distribution
    (GetDistribution) holds exactly its records and gives its percentiles.
perld must be alive throughout and exit 0 on SIGTERM. Prints a table, the
resource summary, perld's warnings and errors, the nonzero
refused/dropped/error counters of /metrics, then PASSED or FAILED: ...
(exit 1). A failed soak keeps its scratch directory (perld's log, the
clients' outputs) and says where.
"""
import argparse
import csv
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ next to perld_it.py
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import perld_it  # noqa: E402
from goals_daemon import cpu_by_thread_name, thread_cpu  # noqa: E402
from perld_it import (PERCENTS, Daemon, check, exact_percentiles,  # noqa: E402
                      load_stubs, wait_ended)

SIZE = 100  # bytes per record: -throughput MB/s = rate * SIZE / 2^20
QUERY_PERCENTS = [0] + PERCENTS[:-1] + [99.999, 100]
CLK_TCK = os.sysconf("SC_CLK_TCK")
CSV_FIELDS = ["elapsed_s", "unix_time", "rss_kib", "hwm_kib", "threads", "fds", "cpu_s",
              "cpu_pct", "clients_cpu_s", "load1", "scrapes", "scrape_failures", "hups",
              "data_kib", "other_kib", "recorders_kib", "snapshot_store_kib", "breakdown_kib",
              "sqlite_kib"]
# What perld accounts as held data: every run's recorders (the exact
# distributions: each new distinct latency costs memory, by design), the
# snapshot store (with every run's live total), the windows clients' own
# distributions (GetClients' breakdown) and SQLite's caches. RSS minus these ("other": code,
# stacks, buffers, the allocator's free pages) is where a leak would show.
DATA_METRICS = ("perld_run_recorder_memory_bytes", "perld_snapshot_store_bytes",
                "perld_ingest_breakdown_bytes", "perld_state_sqlite_memory_bytes")
# Each data metric's own CSV column (KiB), so a soak says which part grew.
COLUMN = {"perld_run_recorder_memory_bytes": "recorders_kib",
          "perld_snapshot_store_bytes": "snapshot_store_kib",
          "perld_ingest_breakdown_bytes": "breakdown_kib",
          "perld_state_sqlite_memory_bytes": "sqlite_kib"}

CONFIG = """\
# tests/bench/soak.py's daemon (written at every SIGHUP; drainTimeoutMs alternates)
logLevel: info
drainTimeoutMs: {drain}
reportingIntervalMs: 1000
maxHashMapSizeMB: 64
totalMaxHashMapSizeMB: 64
exactLatencyMaxMemoryMB: 64
exactTotalLatencyMaxMemoryMB: 64
mallocTrimIntervalMs: {trim_ms}
retention:
  maxWindowsPerRun: {max_windows}
ingest:
  clientTimeoutMs: 60000
"""


# --- /proc ------------------------------------------------------------------

def proc_cpu_seconds(pid):
    """utime + stime of a process (all its threads), seconds; None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_status(pid):
    """{VmRSS, VmHWM (KiB), Threads} of a process."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
    return out


def proc_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


# --- the load -----------------------------------------------------------------

def mbps(rate):
    """perld bench's -throughput (MB/s, 1 MB = 2^20 B) for `rate` records/s of SIZE bytes."""
    return f"{rate * SIZE / 1048576:.9f}"


class Client:
    """One `perlctl load` process into its own new run, with its spool and truth file."""

    def __init__(self, perlctl, target, tmp, index, mode, seconds, rate, nice, unit):
        self.index, self.mode = index, mode
        self.run = f"soak-{mode}-{index}"
        self.truth = os.path.join(tmp, f"client-{index}.json")
        self.out_path = os.path.join(tmp, f"client-{index}.out")
        self.err_path = os.path.join(tmp, f"client-{index}.err")
        cmd = [perlctl, "--target", target, "--json", "load", "-writers", "1",
               "-size", str(SIZE), "-time", unit, "-interval", "1", "-seconds", str(seconds),
               "-throughput", mbps(rate), "--run", self.run, "--new", "--mode", mode,
               "--name", f"soak-client-{index}", "--spool", os.path.join(tmp, f"spool-{index}"),
               "--distribution-out", self.truth]
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err,
                                         preexec_fn=lambda: os.nice(nice))
        self.cpu = 0.0  # last CPU seconds read while it ran

    def sample_cpu(self):
        cpu = proc_cpu_seconds(self.proc.pid) if self.proc.poll() is None else None
        if cpu is not None:
            self.cpu = cpu
        return self.cpu

    def result(self):
        """(exit status, its --json summary or None, the tail of its stderr)."""
        with open(self.out_path) as f:
            text = f.read().strip()
        with open(self.err_path) as f:
            err = f.read().strip()
        summary = json.loads(text.splitlines()[-1]) if text else None
        return self.proc.returncode, summary, err[-300:]


class Bench:
    """`perlctl bench --wait --json` for the whole soak; keeps its last line."""

    def __init__(self, perlctl, target, seconds, rate, unit):
        cmd = [perlctl, "--target", target, "--json", "bench", "-writers", "1",
               "-size", str(SIZE), "-time", unit, "-interval", "1", "-seconds", str(seconds),
               "-throughput", mbps(rate), "--name", "soak-bench", "--wait"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines, self.last, self.err = 0, None, ""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.strip():
                self.lines += 1
                self.last = line

    def _read_err(self):
        self.err = self.proc.stderr.read()

    def wait(self, timeout):
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return rc, json.loads(self.last) if self.last else None


def stop_all(clients, bench):
    """SIGINT to every client and the bench still running (they end within about 1 s)."""
    for p in [c.proc for c in clients] + ([bench.proc] if bench else []):
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in [c.proc for c in clients] + ([bench.proc] if bench else []):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


# --- the daemon's side ----------------------------------------------------------

def write_config(path, drain, max_windows, trim_ms):
    with open(path + ".new", "w") as f:
        f.write(CONFIG.format(drain=drain, max_windows=max_windows, trim_ms=trim_ms))
    os.replace(path + ".new", path)


def http_get(http, path, timeout=5):
    """(status, body bytes) of GET http://HTTP/PATH."""
    with urllib.request.urlopen(f"http://{http}{path}", timeout=timeout) as r:
        return r.status, r.read()


def daemon_distribution(query, pb, run_id):
    """Ascending (latency, count) pairs of an ended run's total (GetDistribution pages)."""
    pairs, token = [], ""
    while True:
        page = query.GetDistribution(pb.GetDistributionRequest(run=str(run_id), page_token=token),
                                     timeout=60)
        pairs.extend(zip(page.latency, page.count))
        token = page.next_page_token
        if not token:
            return pairs


def data_bytes(text):
    """{metric: the sum of its samples (every label set)} of DATA_METRICS in an exposition text."""
    totals = dict.fromkeys(DATA_METRICS, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in totals:
            totals[name] += float(line.rsplit(" ", 1)[1])
    return {name: int(value) for name, value in totals.items()}


def metric_values(text, names):
    """{name: value} of the unlabelled samples `names` in an exposition text."""
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in names:
            values[name] = float(value)
    return values


def metric_problems(text):
    """Nonzero samples of /metrics whose family counts refusals, drops, errors or failures."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if re.search(r"refused|dropped|drops|error|failed|failure|omitted", name):
            try:
                value = float(line.rsplit(" ", 1)[1])
            except ValueError:
                continue
            if value != 0:
                out.append(line)
    return out


def log_problems(path):
    """perld's warning and error lines."""
    with open(path) as f:
        return [line.rstrip() for line in f if re.search(r"\b(warning|error)\b", line)]


def count_hup_lines(path):
    with open(path) as f:
        return sum(1 for line in f if "SIGHUP:" in line)


# --- checks ------------------------------------------------------------------------

def check_response_view(query, pb, tag, run_id, truth):
    """A rate-controlled client's response view against its own response times."""
    pairs = [tuple(p) for p in (truth.get("response") or {}).get("latencies", [])]
    answer = query.GetPercentiles(pb.GetPercentilesRequest(
        run=str(run_id), percentiles=QUERY_PERCENTS, kind=pb.LATENCY_KIND_RESPONSE), timeout=60)
    want = exact_percentiles(pairs, QUERY_PERCENTS)
    got = [p.latency for p in answer.percentiles]
    ok = (bool(pairs) and answer.exact and answer.valid_latency_records == sum(c for _, c in pairs)
          and got == want)
    check(ok, f"{tag}: the response view's {answer.valid_latency_records} records and "
          f"GetPercentiles == the client's response times ({sum(c for _, c in pairs)}, {want})")
    return ok


def check_client_run(query, pb, client):
    """The client's run against its own exact total; returns a table row."""
    rc, summary, err = client.result()
    tag = f"{client.run}"
    check(rc == 0 and summary is not None and summary.get("acked") is True,
          f"{tag}: the client exited 0 with every record acknowledged (exit {rc}; {err})")
    if summary is None or not os.path.exists(client.truth):
        return [tag, client.mode, "-", "-", "-", "-", "-", "no truth"]
    with open(client.truth) as f:
        truth = json.load(f)
    pairs = [tuple(p) for p in truth["latencies"]]
    got = wait_ended(query, pb, summary["runId"], 120)
    total = got.total
    check(got.run.state == pb.RUN_STATE_FINISHED,
          f"{tag}: run {summary['runId']} finished ({got.run.failure_reason or 'no reason'})")
    reason = f": {total.inexact_reason}" if total.inexact_reason else ""
    check(total.exact_total, f"{tag}: the total is exact{reason}")
    counters_ok = (total.records == truth["records"] == summary["records"] and
                   total.valid_latency_records == truth["validLatencyRecords"] ==
                   sum(c for _, c in pairs) and
                   total.invalid_latency_records == truth["invalidLatencyRecords"] and
                   total.min_latency == truth["minLatency"] and
                   total.max_latency == truth["maxLatency"])
    check(counters_ok, f"{tag}: daemon records {total.records}, valid "
          f"{total.valid_latency_records}, min {total.min_latency}, max {total.max_latency} == "
          f"the client's {truth['records']}, {truth['validLatencyRecords']}, "
          f"{truth['minLatency']}, {truth['maxLatency']}")
    answer = query.GetPercentiles(pb.GetPercentilesRequest(
        run=str(summary["runId"]), percentiles=QUERY_PERCENTS), timeout=60)
    want = exact_percentiles(pairs, QUERY_PERCENTS)
    asked = [p.latency for p in answer.percentiles]
    check(answer.exact and asked == want,
          f"{tag}: GetPercentiles {QUERY_PERCENTS} == the client's {want} (got {asked})")
    configured = [p.percent for p in total.percentiles]
    shown = [p.latency for p in total.percentiles]
    check(shown == exact_percentiles(pairs, configured),
          f"{tag}: the total's {len(configured)} configured percentiles == the client's")
    response_ok = check_response_view(query, pb, tag, summary["runId"], truth)
    exact = (counters_ok and asked == want and got.run.state == pb.RUN_STATE_FINISHED and
             response_ok)
    return [tag, client.mode, f"{truth['records']:,}", f"{total.records:,}",
            f"{want[QUERY_PERCENTS.index(50)]}/{want[QUERY_PERCENTS.index(99.9)]}/{want[-1]}",
            f"{asked[QUERY_PERCENTS.index(50)]}/{asked[QUERY_PERCENTS.index(99.9)]}/{asked[-1]}"
            if asked else "-", len(pairs), "exact" if exact else "NOT EXACT"]


def check_bench_run(query, pb, bench, timeout):
    """The in-daemon bench: it succeeded, and its stored distribution is its total."""
    try:
        rc, last = bench.wait(timeout)
    except subprocess.TimeoutExpired:
        bench.proc.kill()
        check(False, f"soak-bench: perlctl bench --wait ended within {timeout} s")
        return ["soak-bench", "bench", "-", "-", "-", "-", "-", "NOT ENDED"]
    check(rc == 0 and last is not None and last.get("state") == "finished",
          f"soak-bench: perlctl bench --wait exited 0, run finished (exit {rc}, "
          f"{bench.lines} lines; {bench.err.strip()[-300:]})")
    if last is None:
        return ["soak-bench", "bench", "-", "-", "-", "-", "-", "no result"]
    run_id = last["id"]
    got = wait_ended(query, pb, run_id, 60)
    total = got.total
    pairs = daemon_distribution(query, pb, run_id)
    counted = sum(c for _, c in pairs)
    counters_ok = (total.exact_total and total.records == counted ==
                   total.valid_latency_records and total.invalid_latency_records == 0 and
                   total.records == last["total"]["records"])
    check(counters_ok, f"soak-bench: records {total.records} == its distribution's {counted} "
          f"(valid {total.valid_latency_records}, invalid {total.invalid_latency_records}, "
          f"exact {total.exact_total})")
    answer = query.GetPercentiles(pb.GetPercentilesRequest(
        run=str(run_id), percentiles=QUERY_PERCENTS), timeout=60)
    want = exact_percentiles(pairs, QUERY_PERCENTS)
    asked = [p.latency for p in answer.percentiles]
    check(asked == want, f"soak-bench: GetPercentiles == its distribution's {want} (got {asked})")
    exact = counters_ok and asked == want and rc == 0
    mid = f"{want[QUERY_PERCENTS.index(50)]}/{want[QUERY_PERCENTS.index(99.9)]}/{want[-1]}"
    return ["soak-bench", "bench", f"{counted:,} (distribution)", f"{total.records:,}", mid,
            f"{asked[QUERY_PERCENTS.index(50)]}/{asked[QUERY_PERCENTS.index(99.9)]}/{asked[-1]}"
            if asked else "-", len(pairs), "exact" if exact else "NOT EXACT"]


# --- the summary ------------------------------------------------------------------

def slope_kib_per_hour(rows):
    """Least-squares slope of rss_kib over elapsed_s, KiB per hour (None for < 3 rows)."""
    if len(rows) < 3:
        return None
    xs = [r["elapsed_s"] for r in rows]
    ys = [r["rss_kib"] for r in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 3600 if den else None


def summarize(samples, seconds, warmup, args):
    """Prints the resource summary; returns the RSS growth % (None without samples)."""
    loaded = [s for s in samples if s["elapsed_s"] <= seconds + 0.5]
    after = [s for s in loaded if s["elapsed_s"] >= warmup]
    if not loaded or not after:
        check(False, "resource samples were taken during and after the warm-up")
        return None
    first, warm, end = loaded[0], after[0], after[-1]
    growth = 100.0 * (end["rss_kib"] - warm["rss_kib"]) / warm["rss_kib"]
    slope = slope_kib_per_hour(after)
    span = end["elapsed_s"] - warm["elapsed_s"]
    whole = max(end["elapsed_s"] - first["elapsed_s"], 1e-9)
    cpu_all = 100.0 * (end["cpu_s"] - first["cpu_s"]) / whole
    cpu_after = 100.0 * (end["cpu_s"] - warm["cpu_s"]) / max(span, 1e-9)
    clients_cpu = 100.0 * (end["clients_cpu_s"] - first["clients_cpu_s"]) / whole
    print()
    print(f"Resources ({len(samples)} samples every {args.sample_seconds:g} s; "
          f"warm-up {warmup:g} s = min(10% of {seconds:g} s, 300 s)):")
    print(f"  RSS start {first['rss_kib'] / 1024:.1f} MiB, after warm-up "
          f"({warm['elapsed_s']:.0f} s) {warm['rss_kib'] / 1024:.2f} MiB, "
          f"end ({end['elapsed_s']:.0f} s) {end['rss_kib'] / 1024:.2f} MiB: "
          f"growth {growth:+.2f}% over {span:.0f} s "
          f"(goal < 2%: {'met' if growth < 2 else 'MISSED'})")
    print(f"  RSS after warm-up: min {min(s['rss_kib'] for s in after) / 1024:.2f}, "
          f"max {max(s['rss_kib'] for s in after) / 1024:.2f} MiB; least-squares slope "
          + (f"{slope / 1024:+.2f} MiB/h" if slope is not None else "n/a")
          + f"; VmHWM at the end {end['hwm_kib'] / 1024:.2f} MiB")
    other = 100.0 * (end["other_kib"] - warm["other_kib"]) / max(warm["other_kib"], 1)
    print(f"  held as data (recorders, snapshot store, breakdown, SQLite) after warm-up "
          f"{warm['data_kib'] / 1024:.2f} MiB, end {end['data_kib'] / 1024:.2f} MiB; the rest of "
          f"RSS {warm['other_kib'] / 1024:.2f} -> {end['other_kib'] / 1024:.2f} MiB: growth "
          f"{other:+.2f}% (goal < 2%: {'met' if other < 2 else 'MISSED'})")
    print("  the data by part, after warm-up -> end (KiB): " + ", ".join(
        f"{COLUMN[m][:-4]} {warm[COLUMN[m]]} -> {end[COLUMN[m]]}" for m in DATA_METRICS))
    # The floor and peak of each tenth of the loaded time after warm-up: a
    # leak raises the floors to the end; a bound being filled raises them
    # and levels off; the trims (mallocTrimIntervalMs) make the gap between.
    tenth = max((end["elapsed_s"] - warm["elapsed_s"]) / 10, args.sample_seconds)
    parts = {}
    for sample in after:
        part = min(int((sample["elapsed_s"] - warm["elapsed_s"]) / tenth), 9)
        parts.setdefault(part, []).append(sample["rss_kib"])
    print(f"  RSS floor/peak per {tenth:.0f} s after warm-up (MiB): " + ", ".join(
        f"{min(v) / 1024:.2f}/{max(v) / 1024:.2f}" for _, v in sorted(parts.items())))
    steps = [(b["rss_kib"] - a["rss_kib"], b["elapsed_s"]) for a, b in zip(after, after[1:])]
    if steps:
        step, at = max(steps)
        print(f"  largest RSS rise between two samples after warm-up: {step:+d} KiB at {at:.0f} s "
              f"(a step, not a slope, points at a bound being reached)")
    print(f"  threads: start {first['threads']}, after warm-up {warm['threads']}, end "
          f"{end['threads']}, max {max(s['threads'] for s in loaded)}; open fds: start "
          f"{first['fds']}, after warm-up {warm['fds']}, end {end['fds']}, max "
          f"{max(s['fds'] for s in loaded)}")
    print(f"  perld CPU: {cpu_all:.1f}% of a core over the soak, {cpu_after:.1f}% after warm-up; "
          f"the {args.clients} clients together {clients_cpu:.1f}%; host load average "
          f"{statistics.fmean(s['load1'] for s in loaded):.2f} (mean of 1-min)")
    return growth


def print_table(rows, unit):
    head = ["run", "mode", "records (truth)", "records (perld)", f"p50/p99.9/max truth ({unit})",
            f"p50/p99.9/max perld ({unit})", "distinct", "verdict"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")


# --- main --------------------------------------------------------------------------

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--seconds", type=float, default=3600, help="soak duration")
    ap.add_argument("--clients", type=int, default=10, help="perlctl load clients (half raw)")
    ap.add_argument("--rate", type=float, default=500, help="records/s of each client")
    ap.add_argument("--bench-rate", type=float, default=1000, help="records/s of the bench")
    ap.add_argument("--sample-seconds", type=float, default=10)
    ap.add_argument("--hup-seconds", type=float, default=60)
    ap.add_argument("--scrape-seconds", type=float, default=1)
    ap.add_argument("--max-windows-per-run", type=int, default=20,
                    help="retention.maxWindowsPerRun of the soak's daemon")
    ap.add_argument("--client-nice", type=int, default=10)
    ap.add_argument("--malloc-trim-ms", type=int, default=60000,
                    help="perld's mallocTrimIntervalMs (0: never; the A/B of the trim)")
    ap.add_argument("--time-unit", choices=("ns", "us", "ms"), default="us",
                    help="every run's -time (ns: response views grow with their distinct "
                         "start lags, see above)")
    ap.add_argument("--out", help="CSV file of the samples")
    ap.add_argument("--max-rss-growth", type=float,
                    help="fail when RSS grows more than PCT %% after warm-up")
    ap.add_argument("--perld-env", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment variable for perld (A/B, e.g. MALLOC_ARENA_MAX=2)")
    ap.add_argument("--heaptrack", metavar="OUT",
                    help="attach heaptrack to perld at the end of the warm-up (heaptrack -p; "
                         "profile in OUT.zst, read with heaptrack_print): what the heap holds "
                         "after warm-up. RSS from then on includes heaptrack's own memory")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--smoke", action="store_true",
                    help="CI: 30 s, 2 clients, SIGHUP every 10 s, a sample every 2 s")
    args = ap.parse_args()
    if args.smoke:
        args.seconds, args.clients, args.hup_seconds, args.sample_seconds = 30, 2, 10, 2
    if args.clients < 1 or args.seconds < 10:
        ap.error("--clients must be >= 1 and --seconds >= 10")
    if any("=" not in e for e in args.perld_env):
        ap.error("--perld-env takes KEY=VALUE")
    return args


def main():
    args = parse_args()
    # SIGTERM (a soak stopped by hand or by a job's timeout) unwinds like an
    # error, so the clients, the bench and perld are stopped, not left running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    perld = os.path.join(args.build, "daemon/bench/perld")
    perlctl = os.path.join(args.build, "client/perlctl/perlctl")
    seconds = int(args.seconds)
    warmup = min(0.1 * seconds, 300.0)
    tmp = tempfile.mkdtemp(prefix="perld-soak-")
    pb, rpc, _ = load_stubs(tmp)
    import grpc

    config = os.path.join(tmp, "perld.yaml")
    log = os.path.join(tmp, "perld.log")
    drain = 10000
    write_config(config, drain, args.max_windows_per_run, args.malloc_trim_ms)
    env = dict(e.split("=", 1) for e in args.perld_env)
    d = Daemon(perld, os.path.join(tmp, "state"), config, log=log, env=env or None)
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    print(f"perld pid {d.proc.pid}, gRPC {d.grpc}, HTTP {d.http}; scratch {tmp}; "
          f"{seconds} s, {args.clients} clients at {args.rate:g} records/s, bench at "
          f"{args.bench_rate:g} records/s, -time {args.time_unit}, SIGHUP every "
          f"{args.hup_seconds:g} s"
          + (f"; perld env {env}" if env else ""), flush=True)

    clients, bench = [], None
    out_file = open(args.out, "w", newline="") if args.out else None
    writer = csv.DictWriter(out_file, CSV_FIELDS) if out_file else None
    if writer:
        writer.writeheader()
    samples, scrape_ms = [], []
    last_data_kib = dict.fromkeys(DATA_METRICS, 0)  # data_bytes() of the latest scrape, KiB
    scrapes = scrape_failures = hups = 0
    died = False
    threads_warm = threads_end = None  # (elapsed, thread_cpu()) after warm-up, at the end
    heaptrack = None  # the attached `heaptrack -p` (--heaptrack)
    try:
        t0 = time.monotonic()
        bench = Bench(perlctl, d.grpc, seconds, args.bench_rate, args.time_unit)
        clients = [Client(perlctl, d.grpc, tmp, i, "raw" if i % 2 == 0 else "windows", seconds,
                          args.rate, args.client_nice, args.time_unit)
                   for i in range(args.clients)]
        next_scrape = next_sample = t0
        next_hup = t0 + args.hup_seconds
        last_cpu, last_t = proc_cpu_seconds(d.proc.pid), t0
        print(" ".join(CSV_FIELDS), flush=True)
        # Loaded: until --seconds, then while a client or the bench still runs
        # (their last acknowledgements), sampling all along.
        while True:
            now = time.monotonic()
            if d.proc.poll() is not None:
                died = True
                check(False, f"perld is alive (it exited {d.proc.returncode} at "
                      f"{now - t0:.0f} s)")
                break
            running = [c for c in clients if c.proc.poll() is None]
            if now - t0 >= seconds and not running and bench.proc.poll() is not None:
                break
            if now - t0 > seconds + 180:
                check(False, f"every client and the bench ended within 180 s of --seconds "
                      f"({len(running)} clients still running)")
                break
            if now >= next_scrape:
                next_scrape = max(next_scrape + args.scrape_seconds, now)  # no catch-up burst
                t1 = time.monotonic()
                try:
                    status, body = http_get(d.http, "/metrics")
                    ok = status == 200
                    if ok:
                        last_data_kib = {name: value // 1024
                                         for name, value in data_bytes(body.decode()).items()}
                except (OSError, http.client.HTTPException):
                    ok = False
                scrapes += 1
                scrape_failures += 0 if ok else 1
                if ok:
                    scrape_ms.append((time.monotonic() - t1) * 1000)
            if now >= next_hup and now - t0 < seconds:
                next_hup += args.hup_seconds
                drain = 10001 if drain == 10000 else 10000
                write_config(config, drain, args.max_windows_per_run, args.malloc_trim_ms)
                d.proc.send_signal(signal.SIGHUP)
                hups += 1
                time.sleep(0.5)
                try:
                    ready = http_get(d.http, "/readyz")[0] == 200
                except (OSError, http.client.HTTPException):
                    ready = False
                if not ready or d.proc.poll() is not None:
                    check(False, f"perld ready after SIGHUP {hups} at {now - t0:.0f} s")
            if now >= next_sample:
                next_sample = max(next_sample + args.sample_seconds, now)
                status = proc_status(d.proc.pid)
                cpu = proc_cpu_seconds(d.proc.pid)
                row = {"elapsed_s": round(now - t0, 1), "unix_time": round(time.time(), 1),
                       "rss_kib": status["VmRSS"], "hwm_kib": status["VmHWM"],
                       "threads": status["Threads"], "fds": proc_fds(d.proc.pid),
                       "cpu_s": round(cpu, 2),
                       "cpu_pct": round(100 * (cpu - last_cpu) / max(now - last_t, 1e-9), 1),
                       "clients_cpu_s": round(sum(c.sample_cpu() for c in clients), 2),
                       "load1": round(os.getloadavg()[0], 2), "scrapes": scrapes,
                       "scrape_failures": scrape_failures, "hups": hups,
                       "data_kib": sum(last_data_kib.values()),
                       "other_kib": status["VmRSS"] - sum(last_data_kib.values())}
                row.update({COLUMN[name]: value for name, value in last_data_kib.items()})
                last_cpu, last_t = cpu, now
                samples.append(row)
                if now - t0 <= seconds + 0.5:
                    threads_end = (now - t0, thread_cpu(d.proc.pid))
                    if threads_warm is None and now - t0 >= warmup:
                        threads_warm = threads_end
                        if args.heaptrack:
                            heaptrack = subprocess.Popen(
                                ["heaptrack", "-o", args.heaptrack, "-p", str(d.proc.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                            print(f"heaptrack attached at {now - t0:.0f} s: RSS from here on "
                                  "includes its own memory", flush=True)
                if writer:
                    writer.writerow(row)
                    out_file.flush()
                print(" ".join(str(row[k]) for k in CSV_FIELDS), flush=True)
            time.sleep(max(0.0, min(next_scrape, next_sample) - time.monotonic()))
    except BaseException:
        stop_all(clients, bench)
        d.proc.kill()
        raise
    finally:
        if out_file:
            out_file.close()
    if died:
        stop_all(clients, bench)

    rows = []
    if not died:
        rows = [check_client_run(query, pb, c) for c in clients]
        rows.append(check_bench_run(query, pb, bench, 120))
        after = proc_status(d.proc.pid)
        text = http_get(d.http, "/metrics")[1].decode()
        problems = metric_problems(text)
        trims = metric_values(text, ("perld_malloc_trims_total", "perld_malloc_trim_seconds_total",
                                     "perld_malloc_trim_max_seconds", "perld_snapshot_store_bytes",
                                     "perld_ingest_breakdown_bytes",
                                     "perld_state_sqlite_memory_bytes"))
    else:
        after, problems, trims = None, [], {}
    growth = summarize(samples, seconds, warmup, args)
    if threads_warm and threads_end and threads_end[0] > threads_warm[0]:
        shares = cpu_by_thread_name(threads_warm[1], threads_end[1],
                                    threads_end[0] - threads_warm[0])
        print("  perld CPU by thread after warm-up, % of a core: " +
              ", ".join(f"{n} {pct:.1f}" for n, pct in shares if pct >= 0.05))
    print()
    print_table(rows, args.time_unit)
    if after:
        print(f"\nAfter the runs ended: VmRSS {after['VmRSS'] / 1024:.2f} MiB, "
              f"{after['Threads']} threads, {proc_fds(d.proc.pid)} fds")
    if scrape_ms:
        q = (statistics.quantiles(scrape_ms, n=100, method="inclusive") if len(scrape_ms) > 1
             else scrape_ms * 99)
        print(f"/metrics: {scrapes} scrapes, {scrape_failures} failed; p50 {q[49]:.1f} ms, "
              f"p99 {q[98]:.1f} ms, max {max(scrape_ms):.1f} ms")
    check(scrape_failures == 0, f"every /metrics scrape answered 200 ({scrape_failures} of "
          f"{scrapes} did not)")
    logged = count_hup_lines(log)
    check(logged >= hups, f"perld logged each of the {hups} SIGHUPs ({logged} SIGHUP lines)")
    if "perld_state_sqlite_memory_bytes" in trims:
        print(f"accounted at the end: snapshot store "
              f"{trims.get('perld_snapshot_store_bytes', 0) / 1048576:.2f} MiB, clients' breakdown "
              f"{trims.get('perld_ingest_breakdown_bytes', 0) / 1048576:.2f} MiB, SQLite "
              f"{trims['perld_state_sqlite_memory_bytes'] / 1048576:.2f} MiB")
    if trims.get("perld_malloc_trims_total"):
        n, sec = trims["perld_malloc_trims_total"], trims.get("perld_malloc_trim_seconds_total", 0)
        print(f"malloc_trim: {n:.0f} trims, {sec * 1000:.1f} ms in all, "
              f"{sec * 1000 / n:.2f} ms each on average, the longest "
              f"{trims.get('perld_malloc_trim_max_seconds', 0) * 1000:.2f} ms")
    print(f"/metrics refused/dropped/error counters not zero: {len(problems)}")
    for line in problems:
        print("  " + line)
    warnings = log_problems(log)
    print(f"perld log: {len(warnings)} warning/error lines")
    for line in warnings[:20]:
        print("  " + line)
    if not died:
        rc = d.stop()
        check(rc == 0, f"perld exits 0 on SIGTERM (exit {rc})")
    if heaptrack is not None:
        try:
            heaptrack.wait(timeout=300)  # it writes the profile once perld has exited
            print(f"heap profile: {args.heaptrack}.zst (heaptrack_print -f {args.heaptrack}.zst "
                  f"-M massif.out: the heap over time)")
        except subprocess.TimeoutExpired:
            heaptrack.kill()
            check(False, "heaptrack finished within 300 s of perld's exit")
    if growth is not None and args.max_rss_growth is not None:
        check(growth <= args.max_rss_growth,
              f"RSS growth after warm-up {growth:+.2f}% <= {args.max_rss_growth:g}%")
    if perld_it.failures or args.keep:
        print(f"scratch directory kept: {tmp}")
    status = perld_it.finish(None if args.keep else tmp)
    return status


if __name__ == "__main__":
    sys.exit(main())
