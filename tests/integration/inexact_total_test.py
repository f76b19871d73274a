"""A run total that outgrew its memory budget: no percentile while it is not
exact, and exact at the end from its spilled segments (issue 27).

One windows client sends 8 windows of 40,000 distinct ns latencies each
(320,000 distinct in all) into a run whose total window's budget is 1 MB
(exactTotalLatencyMaxMemoryMB: 1): the total window closes early and its
segments do not fit the run total's budget together.

* While it runs (one report per periodic window) its live total outgrows
  the same budget: GetRun has no percentile for it, GetPercentiles merges
  its stored parts (total segments, then the windows after them) and
  equals the raw data sent so far.
* When it ends, the total is the streaming merge of its spilled segments:
  exact, every percentile equal to the one computed here over the raw data
  -- the run's configured set (GetRun, /api/run) and any other set
  (GetPercentiles and perlctl percentiles, merged on demand), also after a
  restart.
* With retention.maxTotalSegmentBytesPerRun: 0 the segments cannot be kept,
  and every output gives the exact counters and no percentile -- never one
  computed from part of the run: GetRun and GetPercentiles (exact false, no
  percentiles, the reason), `perlctl show --json` and `percentiles --json`
  (null, exit 1 for percentiles), `perlctl show` ("not exact: ..."),
  /api/run (values null) and /metrics (counters, no quantile series for the
  total); the log says why.
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import check, Daemon, IngestStream, wait_ended, finish  # noqa: E402

import grpc  # noqa: E402

WINDOWS, DISTINCT = 8, 40_000


def window(ipb, seq, first):
    deltas = [first] + [1] * (DISTINCT - 1)  # first, first + 1, ...
    total = sum(first + i for i in range(DISTINCT))
    return ipb.WindowReport(sequence=seq, records=DISTINCT, bytes=DISTINCT,
                            valid_latency_records=DISTINCT, min_latency=first,
                            max_latency=first + DISTINCT - 1, total_latency=total,
                            latency_delta=deltas, count=[1] * DISTINCT)


def send_run(ipb, pb, irpc, channel, name, windows=WINDOWS):
    """Opens the run and sends its first `windows` windows."""
    s = IngestStream(irpc.IngestStub(channel), ipb, ipb.IngestOpen(
        run_name=name, client_id=name, client_name=name, mode=ipb.IngestOpen.MODE_WINDOWS,
        time_unit=pb.TIME_UNIT_NS))
    opened = s.recv().opened
    for k in range(windows):
        s.ask(window=window(ipb, k + 1, 1000 + k * DISTINCT))
    return s, opened.run_id


def wait_records(pb, query, run_id, records):
    for _ in range(200):
        t = query.GetRun(pb.GetRunRequest(run=str(run_id)), timeout=10).total
        if t.records >= records:
            return t
        time.sleep(0.05)
    return t


def check_no_percentiles(d, pb, query, ctl, run_id, name, when):
    """Every output: exact counters, no percentile, the reason."""
    records = WINDOWS * DISTINCT
    t = query.GetRun(pb.GetRunRequest(run=str(run_id)), timeout=10).total
    check(t.records == records and t.valid_latency_records == records and
          t.min_latency == 1000 and t.max_latency == 1000 + records - 1,
          f"{when}: the counters are exact ({t.records} records, min {t.min_latency}, "
          f"max {t.max_latency})")
    check(not t.exact_total and len(t.percentiles) == 0 and t.median_latency == 0 and
          "not exact" in t.inexact_reason,
          f"{when}: GetRun: not exact, no percentile, the reason ({len(t.percentiles)} "
          f"percentiles, median {t.median_latency}, {t.inexact_reason[:60]!r})")
    p = query.GetPercentiles(pb.GetPercentilesRequest(run=str(run_id), percentiles=[50, 99]),
                             timeout=10)
    check(not p.exact and len(p.percentiles) == 0 and p.inexact_reason,
          f"{when}: GetPercentiles: exact false, none, the reason ({len(p.percentiles)})")
    out = subprocess.run(ctl + ["--json", "show", str(run_id)], capture_output=True, text=True)
    total = json.loads(out.stdout)["total"] if out.returncode == 0 else {}
    check(total.get("percentiles", 0) is None and total.get("medianLatency", 0) is None and
          total.get("records") == records and "not exact" in total.get("inexactReason", ""),
          f"{when}: perlctl --json show: percentiles null, records exact "
          f"({out.stderr.strip()[:200]})")
    out = subprocess.run(ctl + ["show", str(run_id)], capture_output=True, text=True)
    check(out.returncode == 0 and "not exact: " in out.stdout,
          f"{when}: perlctl show says not exact ({out.stdout.strip()[-200:]})")
    out = subprocess.run(ctl + ["--json", "percentiles", str(run_id)],
                         capture_output=True, text=True)
    answer = json.loads(out.stdout) if out.stdout.strip() else {}
    check(out.returncode == 1 and answer.get("percentiles", 0) is None and
          answer.get("exact") is False,
          f"{when}: perlctl percentiles: null, exit 1 ({out.returncode})")
    with urllib.request.urlopen(f"http://{d.http}/api/run?id={run_id}", timeout=10) as r:
        api = json.loads(r.read())["total"]
    check(api["values"] is None and api["counts"] is None and not api["exact"] and
          api["records"] == records, f"{when}: /api/run: total values null, records exact")
    with urllib.request.urlopen(f"http://{d.http}/metrics", timeout=10) as r:
        metrics = r.read().decode()
    quantiles = [line for line in metrics.splitlines()
                 if f'run="{name}"' in line and "quantile=" in line and "total" in line]
    counted = [line for line in metrics.splitlines() if f'run="{name}"' in line]
    check(counted and not quantiles,
          f"{when}: /metrics: the run's series, no quantile of its total ({quantiles[:2]})")


def metric(d, series):
    """A sample of the daemon's /metrics (0 when absent)."""
    with urllib.request.urlopen(f"http://{d.http}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(series + " "):
                return float(line.split()[-1])
    return 0


def check_exact(pb, query, ctl, run_id, when):
    """The ended total equals the raw data's percentiles, any set."""
    records = WINDOWS * DISTINCT
    raw = [(1000 + i, 1) for i in range(records)]
    t = query.GetRun(pb.GetRunRequest(run=str(run_id)), timeout=10).total
    configured = [p.percent for p in t.percentiles]
    got = [p.latency for p in t.percentiles]
    want = perld_it.exact_percentiles(raw, configured)
    check(t.exact_total and t.records == records and configured and got == want and
          t.median_latency == raw[records // 2][0] and not t.inexact_reason,
          f"{when}: GetRun: the total is exact, {len(got)} percentiles equal the raw data's "
          f"({got[:3]} vs {want[:3]}), median {t.median_latency}")
    other = [0.5, 33.3, 50, 99.999]
    p = query.GetPercentiles(pb.GetPercentilesRequest(run=str(run_id), percentiles=other),
                             timeout=30)
    got = [q.latency for q in p.percentiles]
    check(p.exact and p.final and got == perld_it.exact_percentiles(raw, other),
          f"{when}: GetPercentiles of another set, merged from the segments: {got}")
    out = subprocess.run(ctl + ["--json", "percentiles", str(run_id), "--p", "99.9"],
                         capture_output=True, text=True)
    answer = json.loads(out.stdout) if out.stdout.strip() else {}
    values = list((answer.get("percentiles") or {}).values())
    check(out.returncode == 0 and answer.get("exact") is True and
          values == perld_it.exact_percentiles(raw, [99.9]),
          f"{when}: perlctl percentiles --p 99.9: {values} ({out.stderr.strip()[:200]})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-inexact-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    ipb = importlib.import_module("perld.v1.ingest_pb2")
    irpc = importlib.import_module("perld.v1.ingest_pb2_grpc")
    base = ("exactTotalLatencyMaxMemoryMB: 1\nreportingIntervalMs: 200\n"
            "ingest:\n  maxPairsPerReport: 50000\n")
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write(base)
    state = os.path.join(tmp, "state")
    d = Daemon(args.perld, state, config=config)
    channel = grpc.insecure_channel(d.grpc)
    query = rpc.QueryStub(channel)
    ctl = [args.perlctl, "--target", d.grpc]

    # While it runs: one report per periodic window (200 ms), so the live
    # total (the windows merged, the same 1 MB budget) outgrows memory at
    # the second and has no percentile of its own; GetPercentiles merges its
    # stored parts (total segments, then the windows after them).
    s, run_id = send_run(ipb, pb, irpc, channel, "wide", windows=0)
    records = WINDOWS * DISTINCT
    running = 5
    for k in range(running):
        s.ask(window=window(ipb, k + 1, 1000 + k * DISTINCT))
        t = wait_records(pb, query, run_id, (k + 1) * DISTINCT)
    so_far = [(1000 + i, 1) for i in range(running * DISTINCT)]
    check(t.records == running * DISTINCT and not t.exact_total and not t.percentiles and
          "not exact" in t.inexact_reason,
          f"running: GetRun's live total has no percentile ({t.records} records, "
          f"exact {t.exact_total}, {len(t.percentiles)} percentiles)")
    asked = [1, 50, 99, 99.99]
    p = query.GetPercentiles(pb.GetPercentilesRequest(run=str(run_id), percentiles=asked),
                             timeout=30)
    got = [q.latency for q in p.percentiles]
    check(p.exact and not p.final and p.valid_latency_records == running * DISTINCT and
          got == perld_it.exact_percentiles(so_far, asked),
          f"running: GetPercentiles merges the stored parts: {got} "
          f"(want {perld_it.exact_percentiles(so_far, asked)})")
    for k in range(running, WINDOWS):
        s.ask(window=window(ipb, k + 1, 1000 + k * DISTINCT))
    s.finish(WINDOWS)
    run = wait_ended(query, pb, run_id)
    check(run.total.segments >= 2, f"the total window closed early: {run.total.segments} segments")
    check_exact(pb, query, ctl, run_id, "ended")
    with urllib.request.urlopen(f"http://{d.http}/api/run?id={run_id}", timeout=10) as r:
        api = json.loads(r.read())["total"]
    check(api["exact"] and api["values"] is not None and api["records"] == records,
          "/api/run: the ended total's values")
    spilled = metric(d, "perld_state_total_segment_bytes_total")
    check(spilled > records, f"/metrics: the spilled segments' bytes are counted ({spilled})")
    check(d.stop() == 0, "SIGTERM: exit 0")

    # A restart: the spilled total still answers any set from its segments.
    d = Daemon(args.perld, state, config=config)
    channel = grpc.insecure_channel(d.grpc)
    query = rpc.QueryStub(channel)
    check_exact(pb, query, [args.perlctl, "--target", d.grpc], run_id, "after a restart")
    check(d.stop() == 0, "SIGTERM: exit 0")

    # No room for the segments: the ended total stays without percentiles.
    with open(config, "w") as f:
        f.write(base + "retention:\n  maxTotalSegmentBytesPerRun: 0\n")
    log = os.path.join(tmp, "perld-b.log")
    d = Daemon(args.perld, os.path.join(tmp, "state-b"), config=config, log=log)
    channel = grpc.insecure_channel(d.grpc)
    query = rpc.QueryStub(channel)
    s, run_id = send_run(ipb, pb, irpc, channel, "tight")
    s.finish(WINDOWS)
    wait_ended(query, pb, run_id)
    check_no_percentiles(d, pb, query, [args.perlctl, "--target", d.grpc], run_id, "tight",
                         "segments past their budget")
    unstored = metric(d, 'perld_state_unstored_distributions_total{kind="total_segment"}')
    check(unstored >= 1, f"/metrics: the segments left without their distribution ({unstored})")
    check(d.stop() == 0, "SIGTERM: exit 0")
    with open(log) as f:
        text = f.read()
    check("maxTotalSegmentBytesPerRun" in text and "could not be merged" in text,
          "the log says why the total has no percentiles")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
