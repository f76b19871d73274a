#!/usr/bin/env python3
"""Rate-controlled runs cannot hide a stall (issue 30), against the real
binaries: a daemon bench at -throughput 1 MB/s of 1 KiB records (1,024
operations/s, one writer) whose whole process is stopped (SIGSTOP) for 1 s
in the middle of the run, as a stalled host or a GC pause would.

  * burst catch-up (the default): the ~1,024 operations whose slots fell in
    the stall run late, as fast as the worker can, right after it. Their
    response times (end - intended start) ramp from ~1 s down to ~0, so
    about half of them are >= 500 ms and the response maximum is >= the
    stall; their service times (end - actual start: a no-op) stay what they
    were, so service p99.9 stays far below 1 ms. The schedule counters say
    the same: ~1,024 operations late, the largest start lag >= the stall.
  * skip catch-up: the missed slots are dropped and counted (~1,024
    skipped), never run late: response time stays small.
  * both views hold every operation, exactly: the response view's and the
    service run's totals count the same records, and /metrics shows both
    under one run with kind="response" / kind="service".
  * a target rate the worker cannot reach is flagged "rate not sustained"
    (the lag grew window after window), on both views and in perlctl show.
  * perld bench (no daemon) prints a response and a service line per window
    and its -csvfile gets a last column Kind.
  * a closed-loop run has service time only: --kind response is refused
    (exit 1, FAILED_PRECONDITION naming why).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, Perlctl, check, finish  # noqa: E402

RATE = 1024  # operations/s: -throughput 1 (MB/s) of -size 1024 records
STALL_S = 1.0
SECONDS = 6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-rate-stall-")
    d = Daemon(args.perld, os.path.join(tmp, "state"), log=os.path.join(tmp, "perld.log"))

    perlctl = Perlctl(args.perlctl, d.grpc)
    ctl, ctl_json, distribution = perlctl.run, perlctl.json, perlctl.distribution

    def stalled_bench(name, catchup):
        """Runs the bench, stops the daemon for STALL_S in its third second."""
        bench = subprocess.Popen(
            [args.perlctl, "--target", d.grpc, "bench", "-writers", "1", "-size", "1024",
             "-throughput", "1", "-seconds", str(SECONDS), "-time", "us", "-interval", "1",
             "-catchup", catchup, "--name", name, "--wait"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)
        os.kill(d.proc.pid, signal.SIGSTOP)
        time.sleep(STALL_S)
        os.kill(d.proc.pid, signal.SIGCONT)
        _, err = bench.communicate(timeout=120)
        check(bench.returncode == 0, f"{name}: perlctl bench --wait exit 0 ({err.strip()[-300:]})")

    # --- burst: the stall shows in response time, not in service time -------
    stalled_bench("stall-burst", "burst")
    response = ctl_json("show", "stall-burst")
    service = ctl_json("show", "stall-burst", "--kind", "service")
    check(response.get("kind") == "response" and response.get("name") == "stall-burst:response"
          and service.get("kind") == "service" and service.get("name") == "stall-burst",
          f"show: the default view is response time, --kind service the run itself "
          f"({response.get('name')}/{response.get('kind')}, {service.get('name')}/"
          f"{service.get('kind')})")
    check(response.get("serviceRun") == service.get("id")
          and service.get("responseRun") == response.get("id"),
          "the two views name each other (responseRun / serviceRun)")
    rt, st = response.get("total", {}), service.get("total", {})
    records = st.get("records", -1)
    check(abs(records - RATE * SECONDS) <= RATE * 0.05,
          f"service run: {records} records for {SECONDS} s at {RATE}/s")
    check(rt.get("records") == records and rt.get("validLatencyRecords") == records
          and st.get("validLatencyRecords") == records
          and rt.get("invalidLatencyRecords") == 0 and st.get("invalidLatencyRecords") == 0,
          f"both views hold every operation, exactly: response {rt.get('records')}, service "
          f"{records}, invalid {rt.get('invalidLatencyRecords')}/{st.get('invalidLatencyRecords')}")
    rd = distribution("stall-burst", "response")
    sd = distribution("stall-burst", "service")
    check(sum(c for _, c in rd) == records and sum(c for _, c in sd) == records,
          f"exported distributions count every record ({sum(c for _, c in rd)}, "
          f"{sum(c for _, c in sd)} of {records})")
    slow = sum(c for v, c in rd if v >= 500_000)
    late_ops = sum(c for v, c in rd if v >= 1_000)
    rmax = max((v for v, _ in rd), default=0)
    # The missed slots ramp from STALL_S late down to 0: ~half >= 500 ms.
    check(0.35 * RATE <= slow <= 0.8 * RATE,
          f"response: {slow} operations >= 500 ms (about {RATE // 2}: the stall's half)")
    # At least the stall's worth; more when the host also delays the worker
    # (CI runs tests side by side on 2 cores: up to 3x seen), never hidden.
    check(0.8 * RATE <= late_ops,
          f"response: {late_ops} operations >= 1 ms (at least {RATE}: one stall's worth)")
    check(rmax >= 0.99 * STALL_S * 1e6, f"response max {rmax} us >= the {STALL_S} s stall")
    sp999 = st.get("percentiles", {}).get("99.9", 10**9)
    print(f"figures (burst): records {records}; response >= 1 ms {late_ops}, >= 500 ms {slow}, "
          f"p99 {rt.get('percentiles', {}).get('99')} us, p99.9 "
          f"{rt.get('percentiles', {}).get('99.9')} us, max {rmax} us; service p99.9 {sp999} us, "
          f"max {st.get('maxLatency')} us")
    check(sp999 < 1_000, f"service p99.9 {sp999} us: the operations' own time, unstalled")
    sched = rt.get("schedule") or {}
    check(sched.get("operations") == records, f"schedule: {sched.get('operations')} operations")
    check(abs(sched.get("late", -1) - late_ops) <= 0.01 * late_ops + 5,
          f"schedule: {sched.get('late')} started late, as many as responses >= 1 ms "
          f"({late_ops})")
    check(sched.get("maxLag", 0) >= 0.99 * STALL_S * 1e6 and sched.get("skipped") == 0,
          f"schedule: max start lag {sched.get('maxLag')} us >= the stall, 0 skipped "
          f"({sched.get('skipped')})")
    check((st.get("schedule") or {}) == sched, "the service run's total has the same schedule")

    # /metrics: one run, two kinds.
    metrics = urllib.request.urlopen(f"http://{d.http}/metrics", timeout=30).read().decode()
    for kind in ("response", "service"):
        want = f'run="stall-burst",source="bench",kind="{kind}"}} {records}'
        check(any(line.startswith("perld_run_records_total{") and line.endswith(want)
                  for line in metrics.splitlines()),
              f"/metrics: perld_run_records_total of kind {kind} is {records}")

    # --- skip: missed slots are dropped and counted, never run late ---------
    stalled_bench("stall-skip", "skip")
    response = ctl_json("show", "stall-skip")
    service = ctl_json("show", "stall-skip", "--kind", "service")
    rt, st = response.get("total", {}), service.get("total", {})
    sched = rt.get("schedule") or {}
    skipped = sched.get("skipped", -1)
    check(0.8 * RATE <= skipped,
          f"skip: {skipped} slots skipped (at least {RATE}: one stall's worth)")
    print(f"figures (skip): {st.get('records')} operations, {skipped} skipped, response p99.9 "
          f"{rt.get('percentiles', {}).get('99.9')} us, max {rt.get('maxLatency')} us")
    check(rt.get("records") == st.get("records") == sched.get("operations")
          and abs(st.get("records", 0) + skipped - RATE * SECONDS) <= RATE * 0.05,
          f"skip: {st.get('records')} operations + {skipped} skipped = the schedule's slots")
    check(rt.get("maxLatency", 10**9) < STALL_S * 1e6 / 4,
          f"skip: response max {rt.get('maxLatency')} us: nothing ran a stall late")

    # --- a target the worker cannot reach: flagged, not hidden --------------
    rc, _, err = ctl("bench", "-writers", "1", "-size", "1", "-throughput", "1000", "-seconds",
                     "6", "-time", "us", "-interval", "1", "--name", "too-fast", "--wait")
    check(rc == 0, f"too-fast: perlctl bench --wait ({err.strip()[-200:]})")
    fast = ctl_json("show", "too-fast")
    fast_service = ctl_json("show", "too-fast", "--kind", "service")
    sched = fast.get("total", {}).get("schedule") or {}
    check(fast.get("rateNotSustained") is True and fast_service.get("rateNotSustained") is True,
          "1 G operations/s on one writer: both views say rate not sustained")
    check(sched.get("late", 0) >= 0.9 * sched.get("operations", 1)
          and sched.get("maxLag", 0) >= 3_000_000,
          f"too-fast: {sched.get('late')} of {sched.get('operations')} late, max lag "
          f"{sched.get('maxLag')} us")
    rc, out, _ = ctl("show", "too-fast")
    check("(completed; rate not sustained)" in out, "perlctl show: 'rate not sustained' in state")

    # --- closed loop: service time only -------------------------------------
    rc, _, err = ctl("bench", "-writers", "1", "-records", "5000", "--name", "closed", "--wait")
    check(rc == 0, f"closed-loop bench ({err.strip()[-200:]})")
    closed = ctl_json("show", "closed")
    check(closed.get("kind") == "service" and closed.get("responseRun") == 0
          and closed.get("kindNote") == "service time under closed-loop load"
          and closed.get("total", {}).get("schedule") is None,
          f"closed loop: service time only, no schedule ({closed.get('kindNote')})")
    rc, _, err = ctl("percentiles", "closed", "--kind", "response")
    check(rc == 1 and "FAILED_PRECONDITION" in err and "closed-loop" in err,
          f"closed loop: --kind response refused ({rc}, {err.strip()})")

    # --- perld bench (no daemon): two lines per window, CSV column Kind -----
    csv_path = os.path.join(tmp, "rate.csv")
    p = subprocess.run([args.perld, "bench", "-writers", "2", "-size", "1024", "-throughput", "1",
                        "-seconds", "2", "-time", "us", "-interval", "1", "-csvfile", csv_path],
                       capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    check(p.returncode == 0 and
          sum(line.startswith("PerlBench Response Writing") for line in lines) >= 2 and
          sum(line.startswith("PerlBench Service Writing") for line in lines) >= 2 and
          any(line.startswith("Total PerlBench Response Writing") for line in lines) and
          any(line.startswith("Total PerlBench Service Writing") for line in lines),
          f"perld bench -throughput prints response and service lines ({p.returncode})")
    with open(csv_path) as f:
        rows = [line.rstrip("\n").split(",") for line in f]
    header = rows[0] if rows else []
    kinds = [r[-1] for r in rows[1:]]
    totals = {r[-1]: r[header.index("Records")] for r in rows[1:] if r[4] == "Total"} \
        if "Records" in header else {}
    check(header[-1:] == ["Kind"] and set(kinds) == {"response", "service"} and
          kinds.count("response") == kinds.count("service") and
          totals.get("response") == totals.get("service") and totals.get("service") is not None,
          f"-csvfile: a Kind column, a response and a service row per window, equal totals "
          f"({header[-1:]}, {kinds}, {totals})")

    check(d.stop() == 0, "perld exits 0 on SIGTERM")
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
