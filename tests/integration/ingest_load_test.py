"""perlctl load end to end (the C++ client library against a real perld on a
loopback port): three processes at once (raw, windows, raw) into one run --
the daemon's total equals the sum of the clients' totals and its percentiles
equal those of the merged --distribution-out files, for every percentile; a
client killed with SIGKILL mid-stream (the run stays consistent and the other
clients' records all arrive); the daemon stopping while clients stream (they
report it and exit non-zero; every acknowledged record is in the stored
total); a daemon that is not there yet (the client reconnects, then exits 0).

  /usr/bin/python3 tests/integration/ingest_load_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import check, Daemon, wait_ended, exact_percentiles, merged_distributions  # noqa: E402

PERCENTS = [5, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100]
CONFIG = """
ingest:
  clientTimeoutMs: 1000
drainTimeoutMs: 1000
"""


def load(perlctl, target, run, mode, out, *extra):
    cmd = [perlctl, "--target", target, "--json", "load", "-size", "100", "-time", "ns",
           "--run", run, "--mode", mode, "--distribution-out", out, *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-load-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    import grpc
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write(CONFIG)
    state = os.path.join(tmp, "state")
    d = Daemon(args.perld, state, config=config)
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))

    # --- three processes, both modes, one run ----------------------------------
    outs = [os.path.join(tmp, f"c{i}.json") for i in range(3)]
    procs = [load(args.perlctl, d.grpc, "three", "raw", outs[0], "-writers", "2",
                  "-records", "3000000"),
             load(args.perlctl, d.grpc, "three", "windows", outs[1], "-writers", "1",
                  "-seconds", "2", "-interval", "1"),
             load(args.perlctl, d.grpc, "three", "raw", outs[2], "-writers", "1",
                  "-records", "2000000", "--maxPendingPerWorker", "64")]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        results.append(json.loads(out) if p.returncode == 0 else None)
        check(p.returncode == 0, f"perlctl load exits 0 once acknowledged ({err.strip()[:200]})")
    if all(results):
        run_ids = {r["runId"] for r in results}
        check(len(run_ids) == 1, f"all three joined one run {run_ids}")
        run_id = run_ids.pop()
        check(results[0]["records"] == 3000000 and results[2]["records"] == 2000000,
              "exact-mode clients recorded exactly what they ran")
        run = wait_ended(query, pb, run_id)
        pairs, records = merged_distributions(outs)
        total = sum(r["records"] for r in results)
        check(run.run.state == pb.RUN_STATE_FINISHED, "the run finished")
        check(run.total.records == total == records,
              f"daemon total {run.total.records} == sum of the clients' totals {total}")
        check(run.total.valid_latency_records == sum(c for _, c in pairs),
              "daemon valid records == merged distribution size")
        got = query.GetPercentiles(pb.GetPercentilesRequest(run=str(run_id), percentiles=PERCENTS))
        want = exact_percentiles(pairs, PERCENTS)
        check([p.latency for p in got.percentiles] == want,
              f"every percentile equals the merged distribution's: {want}")

    # --- SIGKILL one client mid-stream -------------------------------------------
    outs = [os.path.join(tmp, f"k{i}.json") for i in range(2)]
    victim = load(args.perlctl, d.grpc, "kill", "raw", os.path.join(tmp, "victim.json"),
                  "-writers", "1", "-seconds", "30")
    survivor = load(args.perlctl, d.grpc, "kill", "windows", outs[0], "-writers", "1",
                    "-seconds", "3", "-interval", "1")
    time.sleep(1.5)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    out, err = survivor.communicate(timeout=120)
    check(survivor.returncode == 0, f"the other client finishes and is acknowledged ({err.strip()[:200]})")
    if survivor.returncode == 0:
        s = json.loads(out)
        run = wait_ended(query, pb, s["runId"], seconds=60)
        check(run.run.state == pb.RUN_STATE_FAILED and "had not closed" in run.run.failure_reason,
              f"the run ends failed, naming the killed client ({run.run.failure_reason[:120]})")
        check(run.total.records > s["records"],
              "the survivor's records and the victim's acknowledged ones are in the total")
        check(run.total.valid_latency_records + run.total.invalid_latency_records
              + run.total.lower_latency_discard_records + run.total.higher_latency_discard_records
              == run.total.records, "the run's counters are consistent")
        hist = query.GetWindowHistory(pb.GetWindowHistoryRequest(run=str(s["runId"])))
        check(len(hist.windows) >= 2, "its windows are kept")

    # --- the daemon stops while clients stream --------------------------------
    streaming = [subprocess.Popen([args.perlctl, "--target", d.grpc, "--timeout", "5", "--json",
                                   "load", "-writers", "1", "-size", "100", "-time", "ns",
                                   "-seconds", "60", "--run", "stop", "--mode", mode],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for mode in ("raw", "windows")]
    time.sleep(2.5)
    rc = d.stop()
    check(rc == 0, f"SIGTERM while clients stream: exit {rc}")
    time.sleep(1)
    acked = 0
    for p in streaming:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        r = json.loads(out) if out.strip() else {}
        check(p.returncode == 1 and r.get("interrupted") and not r.get("acked")
              and r.get("lastStreamError", "").startswith(("UNAVAILABLE", "error")),
              f"the client reports the lost daemon ({r.get('lastStreamError', '')[:80]}; "
              f"{err.strip()[:120]})")
        acked += r.get("ackedRecords", 0)
    d = Daemon(args.perld, state, config=config)
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    stop_runs = [r for r in query.ListRuns(pb.ListRunsRequest()).runs if r.name == "stop"]
    check(len(stop_runs) == 1 and stop_runs[0].state == pb.RUN_STATE_FAILED
          and "shut down" in stop_runs[0].failure_reason,
          "after a restart the interrupted run is stored, failed, naming the shutdown")
    if stop_runs:
        total = query.GetRun(pb.GetRunRequest(run=str(stop_runs[0].id))).total.records
        check(acked > 0 and total >= acked,
              f"every acknowledged record is in the stored total ({total} >= {acked})")
    d.stop()

    # --- a client started before its daemon ------------------------------------
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    early = subprocess.Popen([args.perlctl, "--target", f"127.0.0.1:{port}", "--json", "load",
                              "-writers", "1", "-size", "100", "-time", "ns", "-records",
                              "200000", "--run", "late", "--mode", "raw",
                              # started before its daemon: it waits for the open this long
                              "--connect-timeout", "60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    late = subprocess.Popen([args.perld, "--grpc-listen", f"127.0.0.1:{port}", "--http-listen",
                             "127.0.0.1:0", "--state-dir", state, "--config", config],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out, err = early.communicate(timeout=60)
    r = json.loads(out) if early.returncode == 0 else {}
    check(early.returncode == 0 and r["reconnects"] >= 1 and r["records"] == 200000
          and r["ackedRecords"] == 200000,
          f"a client that reconnects until its daemon is up is acknowledged ({err.strip()[:200]})")
    late.terminate()
    check(late.wait(timeout=60) == 0, "that daemon stops cleanly")
    return perld_it.finish()


if __name__ == "__main__":
    sys.exit(main())
