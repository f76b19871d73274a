#!/usr/bin/env python3
"""The durable client spool end to end (README "Durable spool"): a
`perlctl load --spool DIR` client is killed with SIGKILL while its daemon is
frozen (SIGSTOP: nothing it sends is acknowledged), then started again on
the same DIR. The second client takes over the first one's client id,
replays what the daemon had not acknowledged and adds its own records. The
run's total must be exactly the records of every message the first client
spooled plus the second client's own -- nothing lost, nothing counted twice
-- and a clean close leaves the spool empty. Both spool modes.

Then against a live daemon (issue 24: a batched spool sent messages before
writing them): a client killed at random points five times and restarted
on its spool, in both modes, and a client killed by the failpoint between
its spool append and its send. After every kill the daemon never holds a
sequence the spool does not (its acked sequence <= the spool's last key),
and the run's total and every percentile equal those of the spooled
messages plus the last client's own records.
"""
import argparse
import glob
import json
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import (PERCENTS, Daemon, check, exact_percentiles, finish,  # noqa: E402
                      generate_stubs, merge_pairs, messages_truth, spool_contents)


def spooled_records(spool_dir, ipb):
    """(messages, records) of every record in the spool's segment files."""
    messages = records = 0
    last = 0
    for path in sorted(glob.glob(os.path.join(spool_dir, "seg-*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        offset = 0
        while offset + 16 <= len(data):
            length, _, key = struct.unpack_from("<IIQ", data, offset)
            if offset + 16 + length > len(data) or key <= last:
                break  # a torn tail: the spool truncates it, so do we
            message = ipb.IngestRequest()
            message.ParseFromString(data[offset + 16:offset + 16 + length])
            if message.HasField("batch"):
                b = message.batch
                records += sum(b.records) if len(b.records) else b.count * max(1, b.constant_records)
            elif message.HasField("window"):
                records += message.window.records
            messages += 1
            last = key
            offset += 16 + length
    return messages, records


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generate_stubs(tmp)
        import importlib
        ipb = importlib.import_module("perld.v1.ingest_pb2")
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write("reportingIntervalMs: 200\ningest:\n  clientTimeoutMs: 60000\n")
        log = os.path.join(tmp, "perld.log")
        d = Daemon(args.perld, os.path.join(tmp, "state"), config, log=log)
        try:
            for mode in ("batched", "synced"):
                run = f"spool-{mode}"
                spool = os.path.join(tmp, f"spool-{mode}")
                # --timeout below the test's own: a client that waits in vain says why.
                base = [args.perlctl, "--target", d.grpc, "--json", "--timeout", "90", "load",
                        "-writers", "2",
                        "-size", "100", "-time", "ns", "--run", run, "--spool", spool,
                        "--spool-mode", mode]
                first = subprocess.Popen(base + ["-seconds", "60", "-throughput", "2"],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                time.sleep(1.5)
                os.kill(d.proc.pid, signal.SIGSTOP)  # nothing is acknowledged from here on
                time.sleep(1.0)
                first.kill()
                first.wait()
                os.kill(d.proc.pid, signal.SIGCONT)
                messages, records = spooled_records(spool, ipb)
                check(messages > 0 and records > 0,
                      f"{mode}: the killed client left {messages} messages / {records} records "
                      "in its spool")
                try:
                    second = subprocess.run(base + ["-records", "1000"], capture_output=True,
                                            text=True, timeout=120)
                except subprocess.TimeoutExpired as e:
                    # What both sides saw, for the failure's reader.
                    print(f"{mode}: the restarted client hung; its stderr:\n"
                          f"{(e.stderr or b'').decode(errors='replace')[-3000:]}\n"
                          f"perld's log:\n{open(log).read()[-6000:]}", flush=True)
                    raise
                out = json.loads(second.stdout) if second.returncode == 0 else {}
                check(second.returncode == 0 and out.get("acked") is True,
                      f"{mode}: the restarted client exits 0, everything acknowledged "
                      f"({second.stderr.strip()[:200]})")
                check(out.get("records") == 1000 and out.get("spoolReplayed", 0) > 0,
                      f"{mode}: it replayed {out.get('spoolReplayed')} spooled messages and "
                      "recorded its own 1000")
                total = None
                deadline = time.time() + 60
                while time.time() < deadline:
                    p = subprocess.run([args.perlctl, "--target", d.grpc, "--json", "show", run],
                                       capture_output=True, text=True, timeout=30)
                    shown = json.loads(p.stdout) if p.returncode == 0 else {}
                    total = shown.get("total", {}).get("records")
                    if shown.get("state") not in (None, "running"):
                        break
                    time.sleep(0.1)
                check(total == records + 1000,
                      f"{mode}: run total {total} == spooled {records} + 1000: nothing lost, "
                      "nothing twice")
                left = glob.glob(os.path.join(spool, "seg-*.log")) + glob.glob(
                    os.path.join(spool, "meta"))
                check(not left, f"{mode}: a clean close empties the spool ({left})")
            # A spool holding another run's messages is refused, not mixed in.
            spool = os.path.join(tmp, "spool-other")
            first = subprocess.Popen([args.perlctl, "--target", d.grpc, "load", "-writers", "1",
                                      "-size", "10", "-time", "ns", "-seconds", "60",
                                      "-throughput", "1", "--run", "one", "--spool", spool],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.8)
            os.kill(d.proc.pid, signal.SIGSTOP)
            time.sleep(0.5)
            first.kill()
            first.wait()
            os.kill(d.proc.pid, signal.SIGCONT)
            other = subprocess.run([args.perlctl, "--target", d.grpc, "load", "-writers", "1",
                                    "-records", "10", "-time", "ns", "--run", "two", "--spool",
                                    spool], capture_output=True, text=True, timeout=60)
            check(other.returncode != 0 and "holds unacknowledged messages of run 'one'" in
                  other.stderr, f"another run on a busy spool is refused ({other.stderr.strip()})")
            import grpc
            pb = importlib.import_module("perld.v1.perld_pb2")
            rpc = importlib.import_module("perld.v1.perld_pb2_grpc")
            query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
            rng = random.Random(20261205)
            for mode in ("batched", "synced"):
                live_kills(args, d, tmp, ipb, pb, query, mode, rng)
            failpoint_kill(args, d, tmp, ipb, pb, query)
        except BaseException:
            # What the daemon saw (and whether it is still alive), for the failure's reader.
            print(f"perld's exit status: {d.proc.poll()}; its log:\n{open(log).read()[-8000:]}",
                  flush=True)
            raise
        finally:
            d.stop()
    return finish()


def client_acked(query, pb, run):
    """The acked sequence of the (one) client of `run`, as the daemon holds it
    (0 when no client opened the run yet: killed before its first open)."""
    import grpc
    try:
        reply = query.GetClients(pb.GetClientsRequest(run=run), timeout=10)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return 0
        raise
    return max((c.acked_sequence for c in reply.clients), default=0)


def check_exact(args, d, pb, query, tag, run, spooled, final_out):
    """The run ends with the spooled messages' records plus the final
    client's own, every percentile equal to their merged distribution."""
    pairs, records = messages_truth(spooled.values())
    with open(final_out) as f:
        last = json.load(f)
    merged = merge_pairs(pairs, last["latencies"])
    want_records = records + last["records"]
    deadline = time.time() + 60
    while time.time() < deadline:
        run_view = query.GetRun(pb.GetRunRequest(run=run), timeout=10)
        if run_view.run.state != pb.RUN_STATE_RUNNING:
            break
        time.sleep(0.05)
    check(run_view.run.state == pb.RUN_STATE_FINISHED,
          f"{tag}: the run finished ({run_view.run.failure_reason})")
    check(run_view.total.records == want_records,
          f"{tag}: run total {run_view.total.records} == spooled {records} + the last "
          f"client's {last['records']}: nothing lost, nothing substituted")
    # The clients' service times (their spools hold latencies; a -throughput
    # run shows response time by default).
    got = query.GetPercentiles(pb.GetPercentilesRequest(run=run, percentiles=PERCENTS,
                                                        kind=pb.LATENCY_KIND_SERVICE))
    want = exact_percentiles(merged, PERCENTS)
    check([p.latency for p in got.percentiles] == want,
          f"{tag}: every percentile equals the spooled + final data's {want}")


def live_kills(args, d, tmp, ipb, pb, query, mode, rng):
    """A raw client SIGKILLed at random points five times against a live
    daemon and restarted on its spool, then a last one that closes."""
    run = f"live-{mode}"
    spool = os.path.join(tmp, run)
    # -interval 600: no window closes, so nothing becomes durable and the
    # spool keeps every message: after the last kill it is the truth.
    base = [args.perlctl, "--target", d.grpc, "--json", "load", "-writers", "1", "-size", "100",
            "-time", "ns", "-interval", "600", "--run", run, "--mode", "raw", "--spool", spool,
            "--spool-mode", mode]
    ahead = []
    for _ in range(5):
        p = subprocess.Popen(base + ["-seconds", "60", "-throughput", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.0))
        p.kill()
        p.wait()
        time.sleep(0.3)  # what reached the daemon is applied
        spooled, last = spool_contents(spool, ipb)
        acked = client_acked(query, pb, run)
        if acked > last:
            ahead.append((acked, last))
    check(not ahead and last > 0,
          f"{mode}, live daemon, 5 random kills: the daemon never held a message the spool "
          f"did not (acked > spooled after kills: {ahead}; {last} spooled)")
    out = os.path.join(tmp, f"{run}.json")
    final = subprocess.run(base + ["-records", "2000", "--distribution-out", out],
                           capture_output=True, text=True, timeout=120)
    check(final.returncode == 0, f"{mode}: the last client exits 0 ({final.stderr.strip()[-300:]})")
    if final.returncode == 0:
        check_exact(args, d, pb, query, f"{mode}, 5 random kills", run, spooled, out)


def failpoint_kill(args, d, tmp, ipb, pb, query):
    """The client killed exactly between a spool append and its send."""
    run = "failpoint-spool"
    spool = os.path.join(tmp, run)
    base = [args.perlctl, "--target", d.grpc, "--json", "load", "-writers", "1", "-size", "100",
            "-time", "ns", "-interval", "600", "--run", run, "--mode", "raw", "--spool", spool]
    env = dict(os.environ, PERLD_FAILPOINT="spool-after-append-before-send:40")
    p = subprocess.run(base + ["-seconds", "60", "-throughput", "1"], capture_output=True,
                       text=True, timeout=60, env=env)
    check(p.returncode == -signal.SIGKILL and
          "failpoint spool-after-append-before-send reached" in p.stderr,
          f"the failpoint killed the client at its 40th spooled message (exit {p.returncode})")
    time.sleep(0.3)
    spooled, last = spool_contents(spool, ipb)
    acked = client_acked(query, pb, run)
    # Batched: the 40th (and any other not yet sent) was only buffered.
    check(1 <= last <= 40 and acked <= last,
          f"failpoint: the daemon holds {acked} messages, the spool {last} (<= 40)")
    out = os.path.join(tmp, f"{run}.json")
    final = subprocess.run(base + ["-records", "1000", "--distribution-out", out],
                           capture_output=True, text=True, timeout=120)
    check(final.returncode == 0, f"failpoint: the restarted client exits 0 ({final.stderr[-300:]})")
    if final.returncode == 0:
        check_exact(args, d, pb, query, "failpoint spool-after-append-before-send", run, spooled,
                    out)


if __name__ == "__main__":
    sys.exit(main())
