#!/usr/bin/env python3
"""Runs started with an SLO (issue 28; README "SLO gates"): the daemon
evaluates it at every closed window and at the end, stores and shows the
verdict, and abortOnFail stops a run whose term failed for good.

  * `perlctl bench --slo ... --wait` on a run that meets it: exit 0, the
    run's JSON says "passed", and every verdict line equals the one
    `perlctl check` prints for the same expression on the same final
    total (the daemon and the client evaluate one way);
  * while a run runs, `show --json` says "holding" at a window > 0;
  * a run that misses its SLO without abortOnFail runs to its end
    (endReason completed) and `bench --wait` exits 1, naming the SLO;
  * with --abort-on-fail, `records<=1000` stops a 60 s bench within its
    first windows: endReason slo_failed, state "failed", the failing term
    named in `show`;
  * an ingest run opened with `invalid=0` and abortOnFail: one batch with
    a negative latency stops the run (its client's stream is cancelled)
    and the run names the failed term; a second client asking for another SLO is refused
    (FAILED_PRECONDITION);
  * every verdict survives a restart (read back from the state database);
  * a malformed --slo is a usage error (exit 2) and a malformed
    StartBench.slo is INVALID_ARGUMENT naming the term.

  /usr/bin/python3 tests/integration/slo_gate_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import (Daemon, IngestStream, check, finish, ingest_stubs,  # noqa: E402
                      load_stubs, wait_ended)

PASSING = "p50<=5s,p99.9<=10s,max<=60s,invalid=0,records>=1000,rate>=1000"


def refusal(stream):
    """The error an opened stream's first answer raises (None: it opened)."""
    import grpc
    try:
        stream.recv()
        return None
    except grpc.RpcError as e:
        return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    import grpc
    tmp = tempfile.mkdtemp(prefix="perld-slo-gate-")
    ipb, irpc = ingest_stubs(tmp)
    pb, rpc, _ = load_stubs(tmp)
    state = os.path.join(tmp, "state")
    log = os.path.join(tmp, "perld.log")
    d = Daemon(args.perld, state, log=log)
    shown = {}
    try:
        ctl = [args.perlctl, "--target", d.grpc]

        def run(*a, timeout=120):
            return subprocess.run(ctl + list(a), capture_output=True, text=True, timeout=timeout)

        def show(name):
            p = run("--json", "show", name)
            check(p.returncode == 0, f"show {name} ({p.stderr.strip()})")
            return json.loads(p.stdout)

        # A run that meets its SLO; watched while it runs.
        bench = subprocess.Popen(ctl + ["bench", "-writers", "2", "-seconds", "3", "-interval",
                                        "1", "-time", "us", "--name", "meets", "--slo", PASSING,
                                        "--wait"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = None
        deadline = time.time() + 30
        while time.time() < deadline and bench.poll() is None:
            p = run("--json", "show", "meets")
            if p.returncode == 0:
                s = json.loads(p.stdout)["slo"]
                if s and s["state"] == "holding" and s["window"] > 0:
                    seen = s
                    break
            time.sleep(0.1)
        out, err = bench.communicate(timeout=120)
        check(seen is not None and len(seen["verdicts"]) == 6 and
              all(v["held"] for v in seen["verdicts"]),
              f"while it runs the SLO holds on the total so far ({seen and seen['window']})")
        check(bench.returncode == 0, f"bench --wait meets its SLO: exit 0 ({err.strip()})")
        check("slo:      passed" in out and "PASS p99.9<=10s" in out,
              "bench --wait prints the verdict")
        meets = show("meets")["slo"]
        check(meets["state"] == "passed" and meets["expression"] == PASSING and
              not meets["abortOnFail"], f"the run's SLO passed ({meets['state']})")
        p = run("--json", "check", "meets", "--slo", PASSING)
        verdicts = json.loads(p.stdout)
        lines = [t["text"] for t in verdicts["terms"]] if "terms" in verdicts else None
        check(p.returncode == 0 and lines == [v["line"] for v in meets["verdicts"]],
              f"perld's verdict equals perlctl check's, line for line ({lines})")
        shown["meets"] = meets

        # Misses its SLO, no abort: runs to its end.
        p = run("bench", "-writers", "1", "-seconds", "2", "-interval", "1", "--name", "misses",
                "--slo", "records<=1000,p50<=3600s", "--wait")
        check(p.returncode == 1 and "did not meet its SLO 'records<=1000,p50<=3600s'" in p.stderr,
              f"bench --wait exits 1 naming the SLO ({p.returncode}, {p.stderr.strip()})")
        misses = show("misses")
        check(misses["endReason"] == "completed" and misses["slo"]["state"] == "failed" and
              [v["held"] for v in misses["slo"]["verdicts"]] == [False, True],
              f"without abortOnFail the run completes, its SLO failed ({misses['endReason']})")
        shown["misses"] = misses["slo"]

        # abortOnFail: stopped as soon as records<=1000 failed for good.
        started = time.time()
        p = run("bench", "-writers", "1", "-seconds", "60", "-interval", "1", "--name", "aborts",
                "--slo", "records<=1000,p99<=3600s", "--abort-on-fail", "--wait")
        took = time.time() - started
        aborts = show("aborts")
        check(p.returncode == 1 and took < 20,
              f"abortOnFail stops a 60 s run early ({took:.1f} s, exit {p.returncode})")
        check(aborts["endReason"] == "slo_failed" and aborts["slo"]["state"] == "failed" and
              aborts["slo"]["abortOnFail"] and not aborts["slo"]["verdicts"][0]["held"],
              f"its end reason is slo_failed ({aborts['endReason']}, {aborts['slo']['state']})")
        text = run("show", "aborts").stdout
        check("stopped by its SLO" in text and "FAIL records<=1000:" in text,
              "show names the SLO stop and the failing term")
        shown["aborts"] = aborts["slo"]

        # Ingest: invalid=0 with abortOnFail; one negative latency stops it.
        channel = grpc.insecure_channel(d.grpc)
        gate = ipb.IngestOpen(run_name="ingest-gate", client_id="a", client_name="a",
                              time_unit=3, reporting_interval_ms=200,
                              mode=ipb.IngestOpen.MODE_RAW)
        gate.slo.expression = "invalid=0"
        gate.slo.abort_on_fail = True
        a = IngestStream(irpc.IngestStub(channel), ipb, gate)
        opened = a.recv().opened
        other = ipb.IngestOpen(run_name="ingest-gate", client_id="b", client_name="b",
                               time_unit=3, mode=ipb.IngestOpen.MODE_RAW)
        other.slo.expression = "invalid<=5"
        refused = refusal(IngestStream(irpc.IngestStub(channel), ipb, other, timeout=30))
        check(refused is not None and refused.code() == grpc.StatusCode.FAILED_PRECONDITION and
              "has the SLO 'invalid=0' with abortOnFail" in refused.details(),
              f"a client asking for another SLO is refused ({refused and refused.details()})")
        a.ask(batch=ipb.TimestampBatch(sequence=1, count=3, latency_delta=[100, 100, 100],
                                       constant_records=1, constant_bytes=1))
        a.send(batch=ipb.TimestampBatch(sequence=2, count=1, latency_delta=[-5],
                                        constant_records=1, constant_bytes=1))
        ended_with = None
        try:
            for _ in a.call:
                pass
        except grpc.RpcError as e:
            ended_with = e
        # The stream is cancelled as Control.StopRun cancels it (CANCELLED:
        # gRPC's sync API gives no way to say why); the run says why.
        check(ended_with is not None and
              ended_with.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.ABORTED),
              f"the client's stream ends ({ended_with and ended_with.code()})")
        query = rpc.QueryStub(channel)
        got = wait_ended(query, pb, opened.run_id, seconds=30)
        check(got.run.end_reason == pb.END_REASON_SLO_FAILED and
              got.run.slo_status.state == pb.SloStatus.STATE_FAILED and
              got.total.records == 4 and got.total.invalid_latency_records == 1 and
              "FAIL invalid=0: 1" in [v.line for v in got.run.slo_status.verdicts],
              f"the ingest run was stopped by its SLO with every record it had "
              f"({got.run.end_reason}, {got.total.records} records)")
        # The client reconnecting (as the client library does) is told why.
        again = ipb.IngestOpen(run_name="ingest-gate", client_id="a", client_name="a",
                               time_unit=3, run_id=opened.run_id,
                               mode=ipb.IngestOpen.MODE_RAW)
        told = refusal(IngestStream(irpc.IngestStub(channel), ipb, again, timeout=30))
        check(told is not None and told.code() == grpc.StatusCode.FAILED_PRECONDITION and
              "ended (stopped by its SLO: invalid=0: 1) before client 'a'" in told.details(),
              f"a reconnecting client is told the SLO stopped the run ({told and told.details()})")
        shown["ingest-gate"] = show("ingest-gate")["slo"]

        # Bad expressions.
        p = run("bench", "-seconds", "1", "--slo", "p99<=2parsecs")
        check(p.returncode == 2 and "p99<=2parsecs" in p.stderr,
              f"a malformed --slo is a usage error ({p.returncode}, {p.stderr.strip()})")
        control = rpc.ControlStub(channel)
        try:
            control.StartBench(pb.StartBenchRequest(
                options=pb.BenchOptions(writers=1, seconds=1), slo=pb.SloGate(expression="p99<=")),
                timeout=10)
            code = None
        except grpc.RpcError as e:
            code, details = e.code(), e.details()
        check(code == grpc.StatusCode.INVALID_ARGUMENT and "slo:" in details,
              f"StartBench with a malformed SLO is INVALID_ARGUMENT ({code}, {details})")
    finally:
        d.stop()

    # Every verdict is read back after a restart.
    d = Daemon(args.perld, state, log=log)
    try:
        for name, before in shown.items():
            p = subprocess.run([args.perlctl, "--target", d.grpc, "--json", "show", name],
                               capture_output=True, text=True, timeout=60)
            after = json.loads(p.stdout)["slo"] if p.returncode == 0 else None
            check(after == before, f"{name}: the SLO verdict survives a restart")
    finally:
        d.stop()
    finish(tmp)


if __name__ == "__main__":
    main()
