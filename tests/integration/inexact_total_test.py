"""A run total that outgrew its memory budget answers no percentile (issue 27).

One windows client sends 8 windows of 40,000 distinct ns latencies each
(320,000 distinct in all) into a run whose total window's budget is 1 MB
(exactTotalLatencyMaxMemoryMB: 1): the total window closes early, its two
segments do not fit the run total's budget together, and the run's total
can no longer be exact (before issue 27 its percentiles were computed from
the last segment alone). Every output must then give the exact
counters and no percentile -- never one computed from part of the run:
GetRun and GetPercentiles (exact false, no percentiles, the reason),
`perlctl show --json` and `percentiles --json` (null, exit 1 for
percentiles), `perlctl show` ("not exact: ..."), /api/run (values null)
and /metrics (counters, no quantile series for the total).
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-inexact-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    ipb = importlib.import_module("perld.v1.ingest_pb2")
    irpc = importlib.import_module("perld.v1.ingest_pb2_grpc")
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write("exactTotalLatencyMaxMemoryMB: 1\nreportingIntervalMs: 200\n"
                "ingest:\n  maxPairsPerReport: 50000\n")
    d = Daemon(args.perld, os.path.join(tmp, "state"), config=config)
    channel = grpc.insecure_channel(d.grpc)
    query = rpc.QueryStub(channel)
    s = IngestStream(irpc.IngestStub(channel), ipb, ipb.IngestOpen(
        run_name="wide", client_id="w", client_name="w", mode=ipb.IngestOpen.MODE_WINDOWS,
        time_unit=pb.TIME_UNIT_NS))
    opened = s.recv().opened
    for k in range(WINDOWS):
        s.ask(window=window(ipb, k + 1, 1000 + k * DISTINCT))
    s.finish(WINDOWS)
    run = wait_ended(query, pb, opened.run_id)
    records = WINDOWS * DISTINCT
    t = run.total
    check(t.records == records and t.valid_latency_records == records and
          t.min_latency == 1000 and t.max_latency == 1000 + records - 1,
          f"the counters are exact ({t.records} records, {t.segments} segments, min {t.min_latency}, max {t.max_latency})")
    check(not t.exact_total and len(t.percentiles) == 0 and t.median_latency == 0 and
          "not exact" in t.inexact_reason,
          f"GetRun: not exact, no percentile, the reason ({len(t.percentiles)} percentiles, "
          f"median {t.median_latency}, {t.inexact_reason[:60]!r})")
    p = query.GetPercentiles(pb.GetPercentilesRequest(run=str(opened.run_id),
                                                      percentiles=[50, 99]), timeout=10)
    check(not p.exact and len(p.percentiles) == 0 and p.inexact_reason,
          f"GetPercentiles: exact false, none, the reason ({len(p.percentiles)})")

    ctl = [args.perlctl, "--target", d.grpc]
    out = subprocess.run(ctl + ["--json", "show", str(opened.run_id)], capture_output=True,
                         text=True)
    total = json.loads(out.stdout)["total"] if out.returncode == 0 else {}
    check(total.get("percentiles", 0) is None and total.get("medianLatency", 0) is None and
          total.get("records") == records and "not exact" in total.get("inexactReason", ""),
          f"perlctl --json show: percentiles null, records exact ({out.stderr.strip()[:200]})")
    out = subprocess.run(ctl + ["show", str(opened.run_id)], capture_output=True, text=True)
    check(out.returncode == 0 and "not exact: " in out.stdout,
          f"perlctl show says not exact ({out.stdout.strip()[-200:]})")
    out = subprocess.run(ctl + ["--json", "percentiles", str(opened.run_id)],
                         capture_output=True, text=True)
    answer = json.loads(out.stdout) if out.stdout.strip() else {}
    check(out.returncode == 1 and answer.get("percentiles", 0) is None and
          answer.get("exact") is False,
          f"perlctl percentiles: null, exit 1 ({out.returncode})")

    with urllib.request.urlopen(f"http://{d.http}/api/run?id={opened.run_id}", timeout=10) as r:
        api = json.loads(r.read())["total"]
    check(api["values"] is None and api["counts"] is None and not api["exact"] and
          api["records"] == records, "/api/run: total values null, records exact")
    with urllib.request.urlopen(f"http://{d.http}/metrics", timeout=10) as r:
        metrics = r.read().decode()
    quantiles = [line for line in metrics.splitlines()
                 if 'run="wide"' in line and "quantile=" in line and "total" in line]
    counted = [line for line in metrics.splitlines() if 'run="wide"' in line]
    check(counted and not quantiles,
          f"/metrics: the run's series, no quantile of its total ({quantiles[:2]})")
    check(d.stop() == 0, "SIGTERM: exit 0")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
