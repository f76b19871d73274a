#!/usr/bin/env python3
"""Remote rate-controlled runs cannot hide a stall (issue 30), against the
real binaries: `perlctl load -throughput 1` of 1 KiB records (1,024
operations/s, one worker) into a live daemon, the load process stopped
(SIGSTOP) for 1 s in its third second -- a stalled load-generator host.

  * raw and windows mode alike: the run keeps both views of every
    operation, exactly -- the daemon's response view and service run equal
    the client's own response and service totals, counters and every
    latency's count, bit for bit.
  * the stall shows in response time (end - intended start: ~half of the
    ~1,024 delayed operations >= 500 ms, the maximum >= the stall) and in
    the schedule counters (start lags), never in service time.
  * `-catchup skip`: the missed slots reach the daemon as skipped
    (TimestampBatch.skipped / the response window's schedule), none late.
  * clients of any rate may join a rate-controlled run (both views hold
    their records); a closed-loop client's operations (raw or windows)
    count in both views and not in the schedule; a rate-controlled client
    joining a closed-loop run adds its service time only and is told so.
  * nothing lost in a crash: perld killed (SIGKILL) twice under two spooled
    rate-controlled clients (raw and windows) resumes the run and its
    response view from their common checkpoint; both end equal to the
    clients' merged truth, bit for bit.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, Perlctl, check, finish, free_port  # noqa: E402

RATE = 1024  # operations/s: -throughput 1 (MB/s) of -size 1024 records
STALL_S = 1.0
SECONDS = 6
SHARED_S = 8  # the 'shared' run's first client: long enough for three joiners


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-remote-rate-")
    listen = f"127.0.0.1:{free_port()}"

    def start():
        return Daemon(args.perld, os.path.join(tmp, "state"), log=os.path.join(tmp, "perld.log"),
                      grpc_listen=listen)

    d = start()

    perlctl = Perlctl(args.perlctl, listen)
    ctl, ctl_json, distribution = perlctl.run, perlctl.json, perlctl.distribution

    def stalled_load(name, mode, catchup, stall=True):
        """Runs perlctl load; stops the load process for STALL_S in its third second."""
        dist = os.path.join(tmp, f"{name}.json")
        load = subprocess.Popen(
            [args.perlctl, "--target", d.grpc, "--json", "load", "--run", name, "--mode", mode,
             "--distribution-out", dist, "-writers", "1", "-size", "1024", "-throughput", "1",
             "-seconds", str(SECONDS), "-time", "us", "-interval", "1", "-catchup", catchup],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if stall:
            time.sleep(2.5)
            os.kill(load.pid, signal.SIGSTOP)
            time.sleep(STALL_S)
            os.kill(load.pid, signal.SIGCONT)
        out, err = load.communicate(timeout=120)
        check(load.returncode == 0, f"{name}: perlctl load exit 0 ({err.strip()[-300:]})")
        summary = json.loads(out) if load.returncode == 0 else {}
        with open(dist) as f:
            truth = json.load(f)
        return summary, truth

    def same_total(view, truth, what):
        keys = ("records", "bytes", "validLatencyRecords", "invalidLatencyRecords",
                "minLatency", "maxLatency", "totalLatency")
        diff = {k: (view.get(k), truth.get(k)) for k in keys if view.get(k) != truth.get(k)}
        check(not diff, f"{what}: the daemon's total equals the client's own ({diff or 'all'})")

    for mode in ("raw", "windows"):
        name = f"remote-stall-{mode}"
        summary, truth = stalled_load(name, mode, "burst")
        check(summary.get("targetRate") == RATE and "response" in truth,
              f"{mode}: perlctl load -throughput reports a target rate and a response total")
        response = ctl_json("show", name)
        service = ctl_json("show", name, "--kind", "service")
        check(response.get("kind") == "response" and service.get("kind") == "service"
              and response.get("serviceRun") == service.get("id")
              and service.get("targetRate") == RATE,
              f"{mode}: the remote run is rate-controlled with a response view "
              f"({response.get('kind')}, {service.get('targetRate')})")
        rt, st = response.get("total", {}), service.get("total", {})
        records = st.get("records", -1)
        check(abs(records - RATE * SECONDS) <= RATE * 0.05,
              f"{mode}: {records} records for {SECONDS} s at {RATE}/s")
        same_total(st, truth, f"{mode}: service")
        same_total(rt, truth.get("response", {}), f"{mode}: response")
        rd = distribution(name, "response")
        sd = distribution(name, "service")
        check(rd == truth.get("response", {}).get("latencies") and sd == truth.get("latencies"),
              f"{mode}: both exported distributions equal the client's, bit for bit "
              f"({len(rd)} and {len(sd)} latencies)")
        slow = sum(c for v, c in rd if v >= 500_000)
        rmax = max((v for v, _ in rd), default=0)
        check(0.35 * RATE <= slow <= 0.8 * RATE,
              f"{mode}: response: {slow} operations >= 500 ms (about {RATE // 2})")
        check(rmax >= 0.99 * STALL_S * 1e6, f"{mode}: response max {rmax} us >= the stall")
        sp999 = st.get("percentiles", {}).get("99.9", 10**9)
        check(sp999 < 1_000, f"{mode}: service p99.9 {sp999} us: unstalled")
        sched = rt.get("schedule") or {}
        late = sum(c for v, c in rd if v >= 1_000)
        check(sched.get("operations") == records and sched.get("skipped") == 0
              and sched.get("maxLag", 0) >= 0.99 * STALL_S * 1e6
              and 0.8 * RATE <= sched.get("late", 0),
              f"{mode}: schedule: {sched.get('operations')} operations, {sched.get('late')} "
              f"late (responses >= 1 ms: {late}), max lag {sched.get('maxLag')} us")
        print(f"figures ({mode}): records {records}; response >= 500 ms {slow}, p99 "
              f"{rt.get('percentiles', {}).get('99')} us, p99.9 "
              f"{rt.get('percentiles', {}).get('99.9')} us, max {rmax} us; service p99.9 "
              f"{sp999} us; late {sched.get('late')}, max lag {sched.get('maxLag')} us")

    # --- skip: missed slots reach the daemon as skipped ---------------------
    summary, truth = stalled_load("remote-stall-skip", "raw", "skip")
    response = ctl_json("show", "remote-stall-skip")
    rt = response.get("total", {})
    sched = rt.get("schedule") or {}
    check(sched.get("skipped") == summary.get("skipped") and summary.get("skipped", 0) >= 0.8 * RATE,
          f"skip: the daemon counts the client's {summary.get('skipped')} skipped slots "
          f"({sched.get('skipped')})")
    check(rt.get("maxLatency", 10**9) < STALL_S * 1e6 / 4,
          f"skip: response max {rt.get('maxLatency')} us: nothing ran a stall late")
    same_total(rt, truth.get("response", {}), "skip: response")

    # --- who may join a rate-controlled run, and a closed-loop one --------
    hold = subprocess.Popen(
        [args.perlctl, "--target", d.grpc, "--json", "load", "--run", "shared", "-writers", "1",
         "-size", "1024", "-throughput", "1", "-seconds", str(SHARED_S), "-time", "us",
         "-interval", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    rc, out, err = ctl("--json", "load", "--run", "shared", "--join", "--mode", "windows",
                       "-writers", "1", "-size", "1024", "-time", "us", "-records", "100")
    check(rc == 0, f"a closed-loop client joins a rate-controlled run ({err.strip()[-200:]})")
    closed_truth = json.loads(out) if rc == 0 else {}
    rc, out, err = ctl("--json", "load", "--run", "shared", "--join", "-writers", "1",
                       "-size", "1024", "-time", "us", "-records", "50")
    check(rc == 0, f"a raw closed-loop client joins it too ({err.strip()[-200:]})")
    closed_records = closed_truth.get("records", 0) + (json.loads(out).get("records", 0)
                                                       if rc == 0 else 0)
    rc, out, err = ctl("--json", "load", "--run", "shared", "--join", "-writers", "1", "-size",
                       "1024", "-time", "us", "-throughput", "2", "-seconds", "1")
    other = json.loads(out) if rc == 0 else {}
    check(rc == 0, f"a client at another rate joins it, on its own schedule ({err.strip()[-200:]})")
    out, err = hold.communicate(timeout=60)
    check(hold.returncode == 0, f"shared: the run's own client finished ({err.strip()[-200:]})")
    # Its own count, not the rate times the duration: how many operations a
    # timed paced client completes depends on when it started.
    paced = json.loads(out).get("records", 0) if hold.returncode == 0 else 0
    totals = {}
    for kind in ("service", "response"):
        totals[kind] = ctl_json("show", "shared", "--kind", kind).get("total", {})
    sched = totals["response"].get("schedule") or {}
    check(totals["service"].get("records") == totals["response"].get("records")
          == closed_records + other.get("records", 0) + paced
          and closed_records == 150 and paced >= SHARED_S * RATE // 2,
          f"shared: both views hold every client's records ({totals['service'].get('records')} "
          f"= {closed_records} closed-loop + {other.get('records')} + {paced} paced, about "
          f"{SHARED_S * RATE})")
    check(sched.get("operations") == totals["service"].get("records", 0) - closed_records,
          f"shared: the schedule counts the paced operations only ({sched.get('operations')})")
    # A rate-controlled client joining a closed-loop run: service time only, said.
    holder = subprocess.Popen(
        [args.perlctl, "--target", d.grpc, "load", "--run", "closed", "-writers", "1", "-size",
         "1024", "-seconds", "3", "-time", "us"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    rc, out, err = ctl("--json", "load", "--run", "closed", "--join", "-writers", "1", "-size",
                       "1024", "-time", "us", "-throughput", "1", "-seconds", "1")
    check(rc == 0 and "is closed-loop" in err and "service time only" in err,
          f"a rate-controlled client joining a closed-loop run is told it keeps service time "
          f"only ({err.strip()[-200:]})")
    holder.communicate(timeout=60)
    closed = ctl_json("show", "closed")
    check(closed.get("kind") == "service" and closed.get("responseRun") == 0,
          "the closed-loop run stays service time only")

    # --- a crash resumes both views from one checkpoint ----------------------
    loads, dists = [], []
    for mode in ("raw", "windows"):
        dist = os.path.join(tmp, f"crash-{mode}.json")
        dists.append(dist)
        loads.append(subprocess.Popen(
            [args.perlctl, "--target", d.grpc, "--json", "load", "--run", "crash", "--mode", mode,
             "--spool", os.path.join(tmp, f"spool-{mode}"), "--distribution-out", dist,
             "-writers", "1", "-size", "1024", "-throughput", "1", "-seconds", "7", "-time",
             "us", "-interval", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for _ in range(2):
        time.sleep(2.2)
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(timeout=30)
        time.sleep(0.3)
        d = start()
    truth = {"service": {}, "response": {}}
    for load, dist in zip(loads, dists):
        _, err = load.communicate(timeout=180)
        check(load.returncode == 0, f"crash: a spooled client finished ({err.strip()[-300:]})")
        with open(dist) as f:
            t = json.load(f)
        for kind, part in (("service", t), ("response", t.get("response", {}))):
            for v, c in part.get("latencies", []):
                truth[kind][v] = truth[kind].get(v, 0) + c
    for kind in ("service", "response"):
        got = distribution("crash", kind)
        want = sorted([v, c] for v, c in truth[kind].items())
        check(got == want and sum(c for _, c in want) >= 2 * 6 * RATE,
              f"crash: the {kind} view equals the clients' merged truth after two kill -9 "
              f"({sum(c for _, c in got)} of {sum(c for _, c in want)} records)")
    crashed = ctl_json("show", "crash")
    check(crashed.get("state") == "finished" and crashed.get("kind") == "response",
          f"crash: the response view finished with its run ({crashed.get('state')}, "
          f"{crashed.get('failureReason')})")
    with open(os.path.join(tmp, "perld.log")) as f:
        resumed = f.read().count("resumed from its checkpoint")
    check(resumed == 2, f"crash: the run resumed from its checkpoint after each kill ({resumed})")
    # The schedule counts on from each checkpoint (schema v13): every paced
    # operation once, and a restart reads the same back from the history.
    records = sum(truth["response"].values())
    sched = (crashed.get("total") or {}).get("schedule") or {}
    check(sched.get("operations") == records,
          f"crash: the run's schedule counts every operation once across both resumes "
          f"({sched.get('operations')} of {records})")
    d.stop()
    d = start()
    stored = (ctl_json("show", "crash").get("total") or {}).get("schedule") or {}
    check(stored == sched, f"crash: after a restart the stored total keeps its schedule ({stored})")
    windows = [w for w in ctl_json("history", "crash", "--kind", "response").get("windows", [])
               if w.get("records", 0) > 0]
    counted = [(w.get("records"), (w.get("schedule") or {}).get("operations")) for w in windows]
    check(windows and all(r == o for r, o in counted),
          f"crash: after a restart every stored window with records keeps its schedule "
          f"(records/operations: {counted})")

    d.stop()
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
