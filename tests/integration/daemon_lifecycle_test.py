#!/usr/bin/env python3
"""The perld daemon's lifecycle end to end (issue 8): configuration errors,
SIGTERM mid-run, restart with the same state directory, kill -9, one daemon
per state directory, SIGHUP reload, the HTTP endpoints and perlctl's exit
codes. Issue 25: a failed start (port in use, unusable state directory)
names its step and leaves an ingest run resumable; SIGTERM drains the calls
in flight and only them (an idle connection or a health watch never delays
a stop).

    /usr/bin/python3 tests/integration/daemon_lifecycle_test.py --perld PATH --perlctl PATH
Exit 0 when every check passes; every wait is bounded.
"""
import argparse
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc
from perld_it import Daemon, IngestStream, check, finish, load_stubs


def run(cmd, timeout=60):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def cannot_start(err):
    return next((line for line in err.splitlines() if "cannot start" in line), "")[:160]


def config_errors(perld, tmp):
    cases = [  # (file text, expected message fragment)
        ("reportingIntervalMs: 1000\nreportingIntervallMs: 5\n",
         "perld.yaml:2: unknown key 'reportingIntervallMs'"),
        ("maxQs: [1, 2]\n", "perld.yaml:1:"),
        ("reportingIntervalMs: -5\n", "perld.yaml:1:"),
        ("percentiles: [50, 99\n", "perld.yaml:"),
    ]
    path = os.path.join(tmp, "perld.yaml")
    for text, fragment in cases:
        with open(path, "w") as f:
            f.write(text)
        rc, out, err = run([perld, "--check-config", path])
        check(rc == 2 and fragment in err,
              f"--check-config {text.strip()!r}: exit {rc}, names {fragment!r}")
        rc, _, err = run([perld, "--config", path, "--state-dir", os.path.join(tmp, "never")])
        check(rc == 2 and not os.path.exists(os.path.join(tmp, "never")),
              f"daemon refuses {text.strip()!r} before anything starts (exit {rc})")
    with open(path, "w") as f:
        f.write("reportingIntervalMs: 1234\ntimeUnit: ns\n")
    rc, out, _ = run([perld, "--check-config", path])
    check(rc == 0 and "reportingIntervalMs: 1234" in out,
          "--check-config of a good file exits 0 and prints the effective config")


def http_get(address, path):
    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as r:
        return r.status, r.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, stubs = load_stubs(tmp)
        config_errors(args.perld, tmp)

        state = os.path.join(tmp, "state")
        config = os.path.join(tmp, "live.yaml")
        with open(config, "w") as f:
            f.write("reportingIntervalMs: 300\n")
        d = Daemon(args.perld, state, config)

        def ctl(*cmd):
            return run([args.perlctl, "--target", d.grpc] + list(cmd))

        # HTTP endpoints.
        check(http_get(d.http, "/healthz")[0] == 200, "/healthz 200")
        check(http_get(d.http, "/readyz")[0] == 200, "/readyz 200")

        # One daemon per state directory.
        rc, _, err = run([args.perld, "--grpc-listen", "127.0.0.1:0", "--http-listen",
                          "127.0.0.1:0", "--state-dir", state], timeout=30)
        check(rc == 1 and "in use by another perld" in err,
              f"a second daemon on the same state directory exits 1 ({err.strip()[:120]})")

        # perlctl exit codes.
        rc, _, err = ctl("show", "no-such-run")
        check(rc == 1 and "NOT_FOUND" in err, "perlctl show unknown run: exit 1, NOT_FOUND")
        rc, _, _ = ctl("frobnicate")
        check(rc == 2, "perlctl unknown command: exit 2")

        # An exact run through perlctl, then SIGHUP changes the interval for new runs.
        rc, out, _ = ctl("--json", "bench", "-writers", "2", "-records", "500001", "--name",
                         "exact", "--wait")
        check(rc == 0, "perlctl bench --wait exits 0")
        lines = [json.loads(line) for line in out.strip().splitlines()] if rc == 0 else [{}]
        last = lines[-1]
        check(last.get("name") == "exact" and last.get("state") == "finished" and
              last.get("endReason") == "completed" and
              last.get("total", {}).get("records") == 500001 and
              all(w.get("runName") == "exact" and w.get("runId") == last.get("id")
                  for w in lines[:-1]) and lines[-2].get("kind") == "total",
              f"--json bench --wait: windows with runId/runName, then the ended run with its "
              f"total ({str(last)[:160]})")
        rc, out, _ = ctl("--json", "show", "exact")
        shown = json.loads(out) if rc == 0 else {}
        check(shown.get("total", {}).get("records") == 500001 and
              shown.get("reportingIntervalMs") == 300,
              "show --json: 500001 records, interval 300 ms from the config file")
        check(shown.get("endReason") == "completed", f"endReason completed ({shown.get('endReason')})")

        # A timed run stopped by request is not a plain "finished" (issue 26).
        rc, out, _ = ctl("--json", "bench", "-writers", "1", "-seconds", "60", "--name",
                         "stopped-early")
        time.sleep(0.5)
        rc, out, _ = ctl("--json", "stop", "stopped-early", "--wait")
        stopped = json.loads(out) if rc == 0 else {}
        rc, text, _ = ctl("show", "stopped-early")
        check(stopped.get("endReason") == "stopped" and
              "finished (stopped by request)" in text,
              f"perlctl stop: endReason stopped, show says so ({stopped.get('endReason')})")
        rc, text, _ = ctl("runs")
        row = [line for line in text.splitlines() if "stopped-early" in line]
        check(row and " stopped " in row[0], f"perlctl runs: its state reads stopped ({row})")
        with open(config, "w") as f:
            f.write("reportingIntervalMs: 700\n")
        d.proc.send_signal(signal.SIGHUP)
        time.sleep(1)
        rc, out, _ = ctl("--json", "bench", "-writers", "1", "-records", "1000", "--name",
                         "after-hup", "--wait")
        rc, out, _ = ctl("--json", "show", "after-hup")
        check(rc == 0 and json.loads(out).get("reportingIntervalMs") == 700,
              "SIGHUP: a new run takes the reloaded reportingIntervalMs")

        # SIGTERM mid-run: exit 0, the run ends with a stored final total.
        rc, out, _ = ctl("--json", "bench", "-writers", "1", "-seconds", "60", "--name",
                         "cut-by-sigterm")
        time.sleep(1.5)
        d.proc.send_signal(signal.SIGTERM)
        rc = d.proc.wait(timeout=60)
        check(rc == 0, f"SIGTERM mid-run: exit 0 (got {rc})")

        # Restart on the same state directory: the runs and totals are back.
        d = Daemon(args.perld, state, config)
        channel = grpc.insecure_channel(d.grpc)
        query = rpc.QueryStub(channel)
        listed = {r.name: r for r in query.ListRuns(pb.ListRunsRequest(), timeout=10).runs}
        check({"exact", "after-hup", "cut-by-sigterm"} <= set(listed),
              f"restart: every run is listed ({sorted(listed)})")
        exact = query.GetRun(pb.GetRunRequest(run="exact"), timeout=10)
        check(exact.total.final and exact.total.records == 500001 and
              exact.run.state == pb.RUN_STATE_FINISHED,
              "restart: the finished run has the same final total")
        p = query.GetPercentiles(pb.GetPercentilesRequest(run="exact", percentiles=[99.999]),
                                 timeout=10)
        check(len(p.percentiles) == 1 and p.percentiles[0].latency >= exact.total.min_latency,
              "restart: any percentile of a restored total (its distribution was stored)")
        cut = query.GetRun(pb.GetRunRequest(run="cut-by-sigterm"), timeout=10)
        check(cut.total.final and cut.total.records > 0 and cut.run.state != pb.RUN_STATE_RUNNING,
              f"restart: the run cut by SIGTERM kept its total ({cut.total.records} records, "
              f"{pb.RunState.Name(cut.run.state)})")
        check(cut.run.end_reason == pb.END_REASON_SHUTDOWN and
              exact.run.end_reason == pb.END_REASON_COMPLETED,
              f"restart: endReason shutdown for the run cut by SIGTERM, completed for the "
              f"exact one ({pb.EndReason.Name(cut.run.end_reason)}, "
              f"{pb.EndReason.Name(exact.run.end_reason)})")

        # kill -9 mid-run: the next start brings the run back failed, with the
        # counters of its stored windows.
        control = rpc.ControlStub(channel)
        ipb = importlib.import_module("perld.v1.ingest_pb2")
        irpc = importlib.import_module("perld.v1.ingest_pb2_grpc")
        held = IngestStream(irpc.IngestStub(channel), ipb, ipb.IngestOpen(
            run_name="resumable", client_id="c", client_name="c", mode=ipb.IngestOpen.MODE_RAW,
            time_unit=pb.TIME_UNIT_NS))
        resumable = held.recv().opened.run_id
        held.send(batch=ipb.TimestampBatch(sequence=1, count=3, latency_delta=[5, 1, 1],
                                           constant_records=1, constant_bytes=10))
        while held.recv().ack.durable_sequence < 1:  # checkpointed: it resumes after a crash
            pass
        started = control.StartBench(pb.StartBenchRequest(
            name="killed", options=pb.BenchOptions(writers=1, seconds=60,
                                                   reporting_interval_ms=100)), timeout=10)
        deadline = time.time() + 30
        while time.time() < deadline:
            if query.GetRun(pb.GetRunRequest(run=str(started.run_id)), timeout=10).HasField(
                    "latest"):
                break
            time.sleep(0.05)
        time.sleep(0.5)  # a few windows reach the state store
        last_window_end = query.GetRun(pb.GetRunRequest(run=str(started.run_id)),
                                       timeout=10).latest.end_unix_ms
        d.proc.kill()
        killed_at = time.time() * 1000
        d.proc.wait(timeout=30)
        held.cancel()

        # Failed starts stop what they started, name the step, and leave the
        # state directory as they found it: the ingest run stays resumable.
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        unusable = os.path.join(tmp, "a-file")
        open(unusable, "w").close()
        for args_, step in (
                (["--grpc-listen", f"127.0.0.1:{port}", "--http-listen", "127.0.0.1:0"], "grpc"),
                (["--grpc-listen", "127.0.0.1:0", "--http-listen", f"127.0.0.1:{port}"], "http")):
            rc, _, err = run([args.perld, "--state-dir", state] + args_, timeout=60)
            check(rc == 1 and f"cannot start: {step}: " in err and "in use" in err
                  and "Sanitizer" not in err,
                  f"{step} port in use: exit 1, names the step ({cannot_start(err)})")
        busy.close()
        rc, _, err = run([args.perld, "--grpc-listen", "127.0.0.1:0", "--http-listen",
                          "127.0.0.1:0", "--state-dir", unusable], timeout=60)
        check(rc == 1 and "cannot start: state: " in err and "Sanitizer" not in err,
              f"unusable state directory: exit 1, names the step ({cannot_start(err)})")

        with open(config, "w") as f:
            f.write("reportingIntervalMs: 700\ndrainTimeoutMs: 60000\n")
        log = os.path.join(tmp, "perld.log")
        d = Daemon(args.perld, state, config, log=log)
        channel = grpc.insecure_channel(d.grpc)
        query = rpc.QueryStub(channel)
        resumed = query.GetRun(pb.GetRunRequest(run=str(resumable)), timeout=10)
        check(resumed.run.state == pb.RUN_STATE_RUNNING and resumed.total.records == 3,
              "after the failed starts the ingest run resumes from its checkpoint")
        killed = query.GetRun(pb.GetRunRequest(run="killed"), timeout=10)
        check(killed.run.state == pb.RUN_STATE_FAILED and
              "stopped before the run ended" in killed.run.failure_reason,
              f"kill -9: the run comes back failed ({killed.run.failure_reason[:80]})")
        check(killed.run.end_reason == pb.END_REASON_FAILED and
              last_window_end <= killed.run.end_unix_ms <= killed_at,
              f"kill -9: endReason failed, ended at its last stored window, not at the restart "
              f"({killed.run.end_unix_ms - last_window_end} ms after the window seen, "
              f"{killed_at - killed.run.end_unix_ms:.0f} ms before the kill)")
        check(killed.total.final and killed.total.records > 0 and not killed.total.exact_total,
              f"kill -9: its total has the counters of its stored windows "
              f"({killed.total.records} records)")
        try:
            query.GetPercentiles(pb.GetPercentilesRequest(run="killed", percentiles=[50]),
                                 timeout=10)
            check(False, "kill -9: percentiles of a rebuilt total are refused")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.FAILED_PRECONDITION,
                  f"kill -9: percentiles of a rebuilt total -> {e.code().name}")

        # /metrics covers every run.
        status, text = http_get(d.http, "/metrics")
        check(status == 200 and all(f'run="{n}"' in text for n in ("exact", "killed")),
              "/metrics exposes every run (run label)")
        promtool = shutil.which("promtool")
        if promtool:
            p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                               text=True, timeout=60)
            check(p.returncode == 0, f"promtool check metrics ({p.stderr.strip()[:200]})")
        try:
            drain(d, tmp, log, channel, pb, ipb, irpc, stubs)
        finally:
            d.proc.kill()  # a no-op once it exited
    return finish()


def drain(d, tmp, log, channel, pb, ipb, irpc, stubs):
    """SIGTERM with drainTimeoutMs 60000: an ingest stream in flight finishes
    during the drain and is acknowledged; an idle connection of a client that
    reads nothing (a stopped process) and an open health watch do not hold
    the stop (they did, for the whole drainTimeoutMs)."""
    code = (f"import sys; sys.path.insert(0, {tmp!r})\n"
            "import grpc, time, perld.v1.perld_pb2 as pb, perld.v1.perld_pb2_grpc as rpc\n"
            f"channel = grpc.insecure_channel({d.grpc!r})\n"
            "rpc.QueryStub(channel).ListRuns(pb.ListRunsRequest(), timeout=10)\n"
            "print('ready', flush=True)\n"
            "time.sleep(600)\n")
    idle = subprocess.Popen(["/usr/bin/python3", "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        stop_with_idle_client(d, log, channel, pb, ipb, irpc, stubs, idle)
    finally:
        idle.kill()  # also when stopped
        idle.wait()


def stop_with_idle_client(d, log, channel, pb, ipb, irpc, stubs, idle):
    check(idle.stdout.readline().strip() == "ready", "an idle client made one call")
    idle.send_signal(signal.SIGSTOP)  # its connection stays open, nobody reads it
    watch = stubs["health_pb2_grpc"].HealthStub(channel).Watch(
        stubs["health_pb2"].HealthCheckRequest(service=""), timeout=120)
    check(next(watch).status == 1, "a health watch: SERVING")
    stream = IngestStream(irpc.IngestStub(channel), ipb, ipb.IngestOpen(
        run_name="drained", client_id="d", client_name="d", mode=ipb.IngestOpen.MODE_RAW,
        time_unit=pb.TIME_UNIT_NS))
    stream.recv()
    began = time.time()
    d.proc.send_signal(signal.SIGTERM)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(log) as f:
            if "shutting down" in f.read():
                break
        time.sleep(0.05)
    # The stream in flight sends, is acknowledged and closes during the drain.
    stream.ask(batch=ipb.TimestampBatch(sequence=1, count=2, latency_delta=[7, 1],
                                        constant_records=1, constant_bytes=10))
    ack = stream.finish(1)
    check(ack is not None and ack.HasField("ack") and ack.ack.durable_sequence == 1,
          "an ingest stream in flight at SIGTERM is served until it closes")
    rc = d.proc.wait(timeout=120)
    took = time.time() - began
    check(rc == 0 and took < 30,
          f"SIGTERM: exit 0 in {took:.1f} s with an idle connection and a health watch open "
          "(drainTimeoutMs 60000)")
    statuses = []
    try:
        for r in watch:
            statuses.append(r.status)
    except grpc.RpcError as e:
        statuses.append(e.code().name)
    check(statuses[:1] == [2] and len(statuses) == 2,
          f"the health watch says NOT_SERVING, then ends ({statuses})")


if __name__ == "__main__":
    sys.exit(main())
