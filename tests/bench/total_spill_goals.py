"""Issue 27's goal for totals spilled to the state store:

  A run whose distinct latencies are 10x the total window's budget reports a
  total whose every percentile equals an independent computation over the
  raw data; peak RSS stays within the configured budgets.

A perld with totalMaxHashMapSizeMB: 1 (the raw run's total window is a hash
map of at most 1 MB = 65,536 distinct latencies at 16 B each) takes one raw
Ingest client (TimestampBatch, -time ns) sending --records latencies drawn
here from a wide lognormal (fixed --seed; full mode: 2,000,000 records,
median 200 us, sigma 1, about 735,000 distinct, 11x the budget) at --rate
records/s, as a -time ns run records over time: 100,000/s, so a 500 ms
interval window holds about 50,000 records. The total window closes early
into segments, each spilled to the state store, and the ended run's total is
their streaming merge. Checked against the raw data kept here: the counters
(records, valid, min, max, total latency), exact true, >= 2 segments, every
configured percentile (GetRun), the median, and another set merged on demand
(GetPercentiles; `perlctl percentiles` too when --perlctl is given).

The total window is fed an interval window at a time and closes only at
their ends: with --rate 0 the whole run lands in one or two interval
windows, the total window takes all their distinct latencies past its
budget (2 segments) and the peak RSS check below fails.

Peak RSS: the daemon's VmHWM (/proc/PID/status) read after the run ended and
was queried, against a baseline daemon fed the same number of records drawn
from 1,000 distinct latencies (one segment). The check: the spilled run's
peak is at most the baseline's + 64 MiB, i.e. the daemon's memory does not
grow with the distinct count; the budgets (total window, periodic window,
the runs' memory budget perld logs at start) are printed beside it.

  /usr/bin/python3 tests/bench/total_spill_goals.py \\
      --perld build/release/daemon/bench/perld \\
      --perlctl build/release/client/perlctl/perlctl
  (about 55 s; --smoke: 150,000 records, about 97,000 distinct, still >= 2
  segments, about 5 s; CI)
"""
import argparse
import collections
import importlib
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import perld_it  # noqa: E402
from perld_it import check, Daemon, IngestStream, wait_ended  # noqa: E402

import grpc  # noqa: E402

TOTAL_BUDGET_MB = 1
BYTES_PER_DISTINCT = 16  # LongHashMapLatencyRecorder::kBytesPerDistinct
BUDGET_DISTINCT = TOTAL_BUDGET_MB * 1024 * 1024 // BYTES_PER_DISTINCT  # 65,536
MAX_NS = 180_000_000_000  # LatencyConfig::ForUnit(ns): [0, 180 s]
BATCH = 20_000  # timestamps per TimestampBatch (ingest.maxBatchLength 65,536)
INTERVAL_MS = 500  # the run's reporting interval
RSS_MARGIN_MIB = 64
BASELINE_DISTINCT = 1_000
OTHER_PERCENTS = [0, 0.1, 1, 12.5, 50, 87.5, 99, 99.9, 99.99, 99.999, 100]


def lognormal(rng, n, median_ns, sigma):
    mu = math.log(median_ns)
    return [min(max(int(round(rng.lognormvariate(mu, sigma))), 0), MAX_NS) for _ in range(n)]


def few_values(rng, n, median_ns, sigma, distinct):
    """n latencies drawn from `distinct` lognormal values."""
    pool = set()
    while len(pool) < distinct:
        pool.update(lognormal(rng, distinct - len(pool), median_ns, sigma))
    pool = sorted(pool)
    return [pool[rng.randrange(distinct)] for _ in range(n)]


def send_raw(ipb, pb, irpc, channel, name, latencies, rate):
    """One raw client: the latencies in batches of BATCH, `rate` records/s at
    most (0: as fast as acks come back), then its close. Returns (run id,
    seconds sending)."""
    s = IngestStream(irpc.IngestStub(channel), ipb, ipb.IngestOpen(
        run_name=name, client_id=name, client_name=name, mode=ipb.IngestOpen.MODE_RAW,
        time_unit=pb.TIME_UNIT_NS, reporting_interval_ms=INTERVAL_MS), timeout=3600)
    opened = s.recv().opened
    t0 = time.monotonic()
    seq = 0
    for start in range(0, len(latencies), BATCH):
        chunk = latencies[start:start + BATCH]
        deltas, prev = [], 0
        for v in chunk:
            deltas.append(v - prev)
            prev = v
        seq += 1
        s.ask(batch=ipb.TimestampBatch(sequence=seq, count=len(chunk), latency_delta=deltas,
                                       constant_records=1, constant_bytes=100))
        if rate > 0:
            ahead = t0 + (start + len(chunk)) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    s.finish(seq)
    return opened.run_id, time.monotonic() - t0


def runs_budget(log):
    with open(log) as f:
        m = re.search(r"runs' memory budget: (\d+) bytes(?: \(([^)]*)\))?", f.read())
    return (int(m.group(1)), m.group(2) or "") if m else (None, "")


def check_total(pb, query, ctl, run_id, latencies, what):
    """The ended total against the raw data. Returns the GetRun total."""
    t0 = time.monotonic()
    counts = collections.Counter(latencies)
    pairs = sorted(counts.items())
    ordered = sorted(latencies)
    valid = len(latencies)
    print(f"{what}: truth computed in {time.monotonic() - t0:.1f} s "
          f"({valid} records, {len(pairs)} distinct)", flush=True)
    run = query.GetRun(pb.GetRunRequest(run=str(run_id)), timeout=60)
    t = run.total
    check(t.records == valid and t.valid_latency_records == valid and
          t.invalid_latency_records == 0 and t.lower_latency_discard_records == 0 and
          t.higher_latency_discard_records == 0,
          f"{what}: records {t.records}, valid {t.valid_latency_records} (want {valid} each)")
    check(t.min_latency == ordered[0] and t.max_latency == ordered[-1] and
          t.total_latency == sum(latencies),
          f"{what}: min {t.min_latency}, max {t.max_latency}, total latency {t.total_latency} "
          f"(want {ordered[0]}, {ordered[-1]}, {sum(latencies)})")
    check(t.exact_total and t.final and not t.inexact_reason,
          f"{what}: exact_total {t.exact_total}, final {t.final} {t.inexact_reason[:120]!r}")
    configured = [p.percent for p in t.percentiles]
    got = [p.latency for p in t.percentiles]
    want = perld_it.exact_percentiles(pairs, configured)
    bad = [(p, g, w) for p, g, w in zip(configured, got, want) if g != w]
    check(configured and got == want,
          f"{what}: GetRun: {len(got)} configured percentiles equal the raw data's "
          f"(mismatches (percent, daemon, truth): {bad[:10]})")
    check(t.median_latency == ordered[valid // 2],
          f"{what}: median {t.median_latency} (want {ordered[valid // 2]})")
    p = query.GetPercentiles(pb.GetPercentilesRequest(run=str(run_id), percentiles=OTHER_PERCENTS),
                             timeout=120)
    got = [q.latency for q in p.percentiles]
    want = perld_it.exact_percentiles(pairs, OTHER_PERCENTS)
    bad = [(x, g, w) for x, g, w in zip(OTHER_PERCENTS, got, want) if g != w]
    check(p.exact and p.final and p.valid_latency_records == valid and got == want and
          p.median_latency == ordered[valid // 2],
          f"{what}: GetPercentiles {OTHER_PERCENTS}: exact {p.exact}, {got} "
          f"(mismatches (percent, daemon, truth): {bad[:10]}) {p.inexact_reason[:120]!r}")
    if ctl:
        percents = [50, 99.9, 99.999]
        out = subprocess.run(ctl + ["--json", "percentiles", str(run_id), "--p",
                                    ",".join(str(x) for x in percents)],
                             capture_output=True, text=True)
        answer = json.loads(out.stdout) if out.stdout.strip() else {}
        values = list((answer.get("percentiles") or {}).values())
        check(out.returncode == 0 and answer.get("exact") is True and
              values == perld_it.exact_percentiles(pairs, percents),
              f"{what}: perlctl percentiles --p {percents}: {values} "
              f"({out.stderr.strip()[:200]})")
    return t, len(pairs)


def measure(args, pb, rpc, ipb, irpc, tmp, tag, latencies, ctl_path):
    """A fresh daemon, one raw run of `latencies`, checked. Returns
    (total, distinct, peak RSS KiB, runs' memory budget, its source, send seconds)."""
    config = os.path.join(tmp, f"{tag}.yaml")
    with open(config, "w") as f:
        f.write(f"totalMaxHashMapSizeMB: {TOTAL_BUDGET_MB}\nreportingIntervalMs: {INTERVAL_MS}\n")
    log = os.path.join(tmp, f"{tag}.log")
    d = Daemon(args.perld, os.path.join(tmp, f"state-{tag}"), config=config, log=log)
    try:
        channel = grpc.insecure_channel(d.grpc, options=[
            ("grpc.max_receive_message_length", 64 << 20)])
        query = rpc.QueryStub(channel)
        ctl = [ctl_path, "--target", d.grpc] if ctl_path else None
        run_id, sent = send_raw(ipb, pb, irpc, channel, tag, latencies, args.rate)
        print(f"{tag}: {len(latencies)} records sent in {sent:.1f} s "
              f"({len(latencies) / max(sent, 1e-9):,.0f}/s)", flush=True)
        t0 = time.monotonic()
        wait_ended(query, pb, run_id, seconds=600)
        print(f"{tag}: the run ended {time.monotonic() - t0:.1f} s after the close", flush=True)
        total, distinct = check_total(pb, query, ctl, run_id, latencies, tag)
        peak = d.rss_kib("VmHWM")
        channel.close()
    finally:
        code = d.stop()
    check(code == 0, f"{tag}: SIGTERM: exit {code}")
    with open(log) as f:
        text = f.read()
    check("could not be merged" not in text, f"{tag}: the log has no unmerged total")
    budget, source = runs_budget(log)
    return total, distinct, peak, budget, source, sent


def main():
    started = time.monotonic()
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", help="also check `perlctl percentiles` (optional)")
    ap.add_argument("--smoke", action="store_true",
                    help="150,000 records, about 97,000 distinct (>= 2 segments)")
    ap.add_argument("--records", type=int, help="default 2,000,000 (smoke 150,000)")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--median-ns", type=float,
                    help="the lognormal's median, ns: default 200,000 (smoke 50,000)")
    ap.add_argument("--sigma", type=float, default=1.0, help="the lognormal's sigma")
    ap.add_argument("--rate", type=float, default=100_000,
                    help="records/s the client sends at most (default 100,000: about 50,000 "
                         "per 500 ms window); 0: as fast as the daemon acks")
    args = ap.parse_args()
    records = args.records or (150_000 if args.smoke else 2_000_000)
    median_ns = args.median_ns or (50_000 if args.smoke else 200_000)
    tmp = tempfile.mkdtemp(prefix="perld-total-spill-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    ipb = importlib.import_module("perld.v1.ingest_pb2")
    irpc = importlib.import_module("perld.v1.ingest_pb2_grpc")

    rng = random.Random(args.seed)
    t0 = time.monotonic()
    wide = lognormal(rng, records, median_ns, args.sigma)
    distinct = len(set(wide))
    print(f"data: {records} records, lognormal median {median_ns:,.0f} ns sigma {args.sigma} "
          f"(seed {args.seed}): {distinct} distinct = {distinct / BUDGET_DISTINCT:.1f}x the total "
          f"window's {BUDGET_DISTINCT} ({TOTAL_BUDGET_MB} MB); "
          f"drawn in {time.monotonic() - t0:.1f} s; sent at "
          f"{f'{args.rate:,.0f} records/s' if args.rate > 0 else 'full speed'}, "
          f"{INTERVAL_MS} ms interval windows", flush=True)
    if not args.smoke:
        check(distinct >= 10 * BUDGET_DISTINCT,
              f"the distinct latencies are >= 10x the total window's budget "
              f"({distinct} >= {10 * BUDGET_DISTINCT})")

    total, got_distinct, peak, budget, source, _ = measure(
        args, pb, rpc, ipb, irpc, tmp, "spilled", wide, args.perlctl)
    check(got_distinct == distinct, "spilled: the truth's distinct count")
    check(total.segments >= 2,
          f"spilled: the total window closed early into {total.segments} segments")
    del wide

    few = few_values(random.Random(args.seed + 1), records, median_ns, args.sigma,
                     BASELINE_DISTINCT)
    base_total, base_distinct, base_peak, _, _, _ = measure(
        args, pb, rpc, ipb, irpc, tmp, "baseline", few, args.perlctl)
    check(base_total.segments == 1,
          f"baseline: {base_distinct} distinct, {base_total.segments} segment")
    del few

    mib = 1024.0
    peak_mib, base_mib = peak / mib, base_peak / mib
    print(f"budgets: total window totalMaxHashMapSizeMB {TOTAL_BUDGET_MB} MB "
          f"({BUDGET_DISTINCT} distinct); periodic window maxHashMapSizeMB 192 MB (default); "
          f"runs' memory budget {budget} bytes"
          f"{f' = {budget / (1 << 20):,.0f} MiB' if budget else ''} ({source})")
    print(f"the spilled distribution held at once would be "
          f"{distinct * BYTES_PER_DISTINCT / (1 << 20):.1f} MiB ({distinct} x "
          f"{BYTES_PER_DISTINCT} B)")
    print(f"peak RSS (VmHWM): spilled run {peak_mib:.1f} MiB, baseline "
          f"({BASELINE_DISTINCT} distinct) {base_mib:.1f} MiB, difference "
          f"{peak_mib - base_mib:+.1f} MiB")
    check(peak_mib <= base_mib + RSS_MARGIN_MIB,
          f"peak RSS does not grow with the distinct count: {peak_mib:.1f} MiB <= baseline "
          f"{base_mib:.1f} + {RSS_MARGIN_MIB} MiB (a generous margin)")
    if budget:
        check(peak * 1024 <= budget,
              f"peak RSS {peak_mib:.1f} MiB is within the runs' memory budget")
    print(f"total_spill records={records} distinct={distinct} segments={total.segments} "
          f"exact={str(total.exact_total).lower()} peak_rss_mib={peak_mib:.1f} "
          f"baseline_rss_mib={base_mib:.1f} seconds={time.monotonic() - started:.1f}")
    return perld_it.finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
