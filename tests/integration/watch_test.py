#!/usr/bin/env python3
"""Many WatchRun streams are events, not threads (issue 25).

Starts the real perld (limits.maxWatchers 200) and checks:
  * 200 watchers of a live bench run (200 ms windows) each receive every
    periodic window once, in order, as they close, then -- after
    StopRun{wait} -- the final total (equal to GetRun's), and end OK; a 201st
    watch is RESOURCE_EXHAUSTED;
  * the daemon's thread count (/proc/PID/status) while they are open grows
    by at most 40 over the idle daemon's (a thread per watcher would add 200);
  * 200 idle watchers (their run closes no window for 300 s) cancelled by
    their client free their slots: 200 new ones open within 60 s;
  * SIGTERM with 200 watchers open on a running bench: each receives the
    run's final total and ends OK, and perld exits 0.

    /usr/bin/python3 tests/integration/watch_test.py --perld PATH
Exit 0 when every check passes; every wait is bounded.
"""
import argparse
from collections import Counter
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, check, finish, load_stubs, wait_ended  # noqa: E402

import grpc  # noqa: E402

WATCHERS = 200
MAX_THREAD_GROWTH = 40


def threads(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


class Watcher:
    """One WatchRun stream read on its own client thread: the windows it
    received and the status it ended with."""

    def __init__(self, query, pb, run, from_start=True):
        self.windows, self.code, self.details = [], None, ""
        self.first = threading.Event()
        self.call = query.WatchRun(pb.WatchRunRequest(run=run, from_start=from_start),
                                   timeout=120)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for event in self.call:
                self.windows.append(event.window)
                self.first.set()
            self.code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            self.code = e.code()
            self.details = e.details() or ""
        self.first.set()

    def join(self, seconds):
        self.thread.join(timeout=seconds)
        return not self.thread.is_alive()


def open_watchers(query, pb, run, n, seconds=60):
    """n watchers that each received a window. Refused ones
    (RESOURCE_EXHAUSTED while cancelled watches are still being let go) are
    opened again until `seconds` pass. Returns the open ones."""
    deadline = time.time() + seconds
    opened = []
    while len(opened) < n and time.time() < deadline:
        batch = [Watcher(query, pb, run) for _ in range(n - len(opened))]
        for w in batch:
            w.first.wait(timeout=max(0.1, deadline - time.time()))
        opened += [w for w in batch if w.code is None and w.windows]
        if len(opened) < n:
            time.sleep(0.1)
    return opened


def open_idle(query, pb, run, n, seconds=60):
    """n watchers of a run that publishes nothing: the server says nothing
    to an accepted one, so one not refused within 3 s counts as open;
    refused ones (RESOURCE_EXHAUSTED while cancelled watches are still being
    let go) are opened again until `seconds` pass. Returns the open ones."""
    deadline = time.time() + seconds
    opened = []
    while len(opened) < n and time.time() < deadline:
        batch = [Watcher(query, pb, run, from_start=False) for _ in range(n - len(opened))]
        time.sleep(3)
        opened += [w for w in batch if w.code is None]
    return opened


def refused_beyond(query, pb, run):
    """True when one more watch is refused RESOURCE_EXHAUSTED: every slot is held."""
    probe = Watcher(query, pb, run, from_start=False)
    probe.first.wait(timeout=30)
    probe.call.cancel()
    return probe.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def in_order_then_total(pb, w, min_periodic=1):
    periodic = [x for x in w.windows if x.kind == pb.Window.KIND_PERIODIC]
    return (len(periodic) >= min_periodic and
            [x.seq for x in periodic] == list(range(1, len(periodic) + 1)) and
            len(w.windows) == len(periodic) + 1 and w.windows[-1].kind == pb.Window.KIND_TOTAL
            and w.windows[-1].final and w.windows[-1].records == sum(x.records for x in periodic))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, _ = load_stubs(tmp)
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write(f"limits:\n  maxWatchers: {WATCHERS}\n")
        log = os.path.join(tmp, "perld.log")
        d = Daemon(args.perld, os.path.join(tmp, "state"), config, log=log)
        pid = d.proc.pid
        channel = grpc.insecure_channel(d.grpc)
        query, control = rpc.QueryStub(channel), rpc.ControlStub(channel)
        time.sleep(1)
        idle = threads(pid)

        def bench(name, seconds, interval_ms):
            opts = pb.BenchOptions(writers=1, size=100, seconds=seconds, throughput_mbps=1,
                                   time_unit=pb.TIME_UNIT_NS, reporting_interval_ms=interval_ms)
            return str(control.StartBench(pb.StartBenchRequest(name=name, options=opts),
                                          timeout=10).run_id)

        # --- 200 watchers of a live run: every window, in order, then the total ---
        run = bench("watched", 300, 200)
        watchers = open_watchers(query, pb, run, WATCHERS)
        check(len(watchers) == WATCHERS, f"{len(watchers)} of {WATCHERS} watchers open")
        opened_at = query.GetRun(pb.GetRunRequest(run=run), timeout=10).latest.seq
        time.sleep(0.5)  # a few windows more
        peak = max(threads(pid) for _ in range(5) if time.sleep(0.05) is None)
        print(f"threads: idle {idle}, with {WATCHERS} watchers of a running bench {peak}")
        check(peak - idle <= MAX_THREAD_GROWTH,
              f"{WATCHERS} open watches add at most {MAX_THREAD_GROWTH} threads "
              f"(idle {idle}, open {peak})")
        extra = Watcher(query, pb, run)
        extra.join(10)
        check(extra.code == grpc.StatusCode.RESOURCE_EXHAUSTED,
              f"watch {WATCHERS + 1}: RESOURCE_EXHAUSTED (limits.maxWatchers): {extra.code}")
        # Live: each watcher gets the windows that close while it watches.
        latest = opened_at + 3
        deadline = time.time() + 60
        while time.time() < deadline and (
                query.GetRun(pb.GetRunRequest(run=run), timeout=10).latest.seq < latest or
                any(len(w.windows) < latest for w in watchers)):
            time.sleep(0.05)
        behind = sum(1 for w in watchers if len(w.windows) < latest)
        check(behind == 0, f"every watcher received windows {opened_at + 1}..{latest}, closed "
              f"after it opened, while the run runs ({behind} behind)")
        stopped = control.StopRun(pb.StopRunRequest(run=run, wait=True), timeout=60).run
        check(stopped.state == pb.RUN_STATE_FINISHED, f"StopRun{{wait}}: the run as it ended "
              f"({pb.RunState.Name(stopped.state)})")
        total = wait_ended(query, pb, run).total
        ended = [w.join(60) for w in watchers]
        good = sum(1 for w in watchers
                   if w.code == grpc.StatusCode.OK and in_order_then_total(pb, w) and
                   w.windows[-1].records == total.records)
        check(all(ended) and good == WATCHERS,
              f"{good} of {WATCHERS} watchers got every window once, in order, then the "
              f"total ({total.records} records), and ended OK")

        # --- cancelled by their clients while idle: the slots come free ----------
        # No window closes in this run for 300 s: a watch learns of a cancel
        # only from gRPC (OnCancel), not from a failing write.
        run = bench("idle", 300, 300_000)
        first = open_idle(query, pb, run, WATCHERS)
        check(len(first) == WATCHERS and refused_beyond(query, pb, run),
              f"{len(first)} of {WATCHERS} idle watchers hold every slot")
        for w in first:
            w.call.cancel()
        second = open_idle(query, pb, run, WATCHERS)
        check(len(second) == WATCHERS and refused_beyond(query, pb, run) and
              all(w.code is None for w in second),
              f"after the cancels {len(second)} of {WATCHERS} new watchers open (the daemon "
              f"let the cancelled ones go)")

        # --- SIGTERM: the bench stops, every watcher gets the total, exit 0 ------
        rc = d.stop()
        check(rc == 0, f"SIGTERM with {WATCHERS} watchers open: exit {rc}")
        ended = [w.join(30) for w in second]
        good = sum(1 for w in second
                   if w.code == grpc.StatusCode.OK and in_order_then_total(pb, w, 0))
        codes = Counter(str(w.code) for w in second)
        if not (all(ended) and good == WATCHERS):
            # What the watchers and the daemon saw, for the failure's reader.
            bad = next(w for w in second if w.code != grpc.StatusCode.OK or
                       not in_order_then_total(pb, w, 0))
            print(f"a watcher that failed: {bad.code} {bad.details!r}, "
                  f"{len(bad.windows)} windows received; perld's log:\n"
                  f"{open(log).read()[-4000:]}", flush=True)
        check(all(ended) and good == WATCHERS,
              f"at shutdown {good} of {WATCHERS} watchers got the stopped run's total and ended OK "
              f"({dict(codes)})")
        channel.close()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
