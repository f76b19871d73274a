#!/usr/bin/env python3
"""Threads of the daemon with many WatchRun streams open (issue 25). A
benchmark command, not a test: it asserts nothing.

  tests/bench/watch_threads.py --build build/release [--watchers 200]
      [--perld PATH --perlctl PATH] [--query-calls 5000]

1. Threads (/proc/PID/status) of an idle daemon (3 s after start).
2. A bench run (1 writer, 1 MB/s, 100 ms windows) with --watchers WatchRun
   streams open on it (each has received a window): threads, sampled every
   100 ms over 2 s, the highest; then StopRun{wait}: every watcher must end
   with the run's total.
3. Threads once the streams have ended.
4. With --query-calls: GetPercentiles latency under a full-speed bench
   (tests/bench/query_latency, as daemon_goals.py measures it).
--perld/--perlctl name other binaries (an older build, for a side by side).
Prints a Markdown table.

  --smoke (CI): 5 watchers, 20 query calls, shorter settles; the script works,
  every watcher ends with the total and SIGTERM exits 0 (no thread count is
  judged).
"""
import argparse
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
from goals_daemon import Daemon, print_table, query_latency_under_load  # noqa: E402
from perld_it import load_stubs  # noqa: E402


def threads(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--perld")
    ap.add_argument("--perlctl")
    ap.add_argument("--watchers", type=int, default=200)
    ap.add_argument("--query-calls", type=int, default=0)
    ap.add_argument("--smoke", action="store_true",
                    help="CI: tiny sizes; the script works and every watcher gets the total")
    args = ap.parse_args()
    settle = 3  # s after the daemon's start, before its idle threads are counted
    if args.smoke:
        args.watchers, args.query_calls, settle = 5, 20, 0.5
    perld = args.perld or os.path.join(args.build, "daemon/bench/perld")
    perlctl = args.perlctl or os.path.join(args.build, "client/perlctl/perlctl")
    import grpc
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, _ = load_stubs(tmp)
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write(f"limits:\n  maxWatchers: {max(256, args.watchers)}\n")
        d = Daemon(perld, os.path.join(tmp, "state"), config)
        pid = d.proc.pid
        time.sleep(settle)
        rows.append(("threads, idle daemon", str(threads(pid)), ""))

        channel = grpc.insecure_channel(d.grpc)
        query, control = rpc.QueryStub(channel), rpc.ControlStub(channel)
        opts = pb.BenchOptions(writers=1, size=100, seconds=600, throughput_mbps=1,
                               time_unit=pb.TIME_UNIT_NS, reporting_interval_ms=100)
        run = str(control.StartBench(pb.StartBenchRequest(name="watched", options=opts),
                                     timeout=10).run_id)
        got = [[] for _ in range(args.watchers)]
        first = threading.Semaphore(0)

        def watch(i):
            try:
                for e in query.WatchRun(pb.WatchRunRequest(run=run), timeout=120):
                    got[i].append(e.window.kind)
                    if len(got[i]) == 1:
                        first.release()
            except grpc.RpcError as e:
                got[i].append(e.code())
                first.release()

        watchers = [threading.Thread(target=watch, args=(i,), daemon=True)
                    for i in range(args.watchers)]
        for t in watchers:
            t.start()
        for _ in watchers:
            first.acquire(timeout=30)
        peak = 0
        for _ in range(20):
            peak = max(peak, threads(pid))
            time.sleep(0.1)
        rows.append((f"threads, {args.watchers} WatchRun streams open", str(peak), ""))
        control.StopRun(pb.StopRunRequest(run=run, wait=True), timeout=60)
        for t in watchers:
            t.join(timeout=30)
        ended = sum(1 for g in got if g and g[-1] == pb.Window.KIND_TOTAL)
        rows.append(("watchers that ended with the total", f"{ended} of {args.watchers}", ""))
        time.sleep(1)
        rows.append(("threads, streams ended", str(threads(pid)), ""))
        channel.close()

        if args.query_calls > 0:
            q = query_latency_under_load(perlctl, os.path.join(args.build,
                                                               "tests/bench/query_latency"),
                                         d.grpc, args.query_calls)
            rows.append(("GetPercentiles (total, 4 percentiles) during a full-speed bench",
                         f"p50 {q['p50']} us, p99 {q['p99']} us, max {q['max']} us", ""))
        rc = d.stop()
        rows.append(("SIGTERM", f"exit {rc}", ""))
    print_table(rows)
    if args.smoke:  # CI: the script works and every stream ended with the total
        ok = ended == args.watchers and rc == 0 and {"p50", "p99", "max"} <= q.keys()
        print("PASSED" if ok else f"FAILED: {ended} of {args.watchers} watchers ended with the "
              f"total, SIGTERM exit {rc}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
