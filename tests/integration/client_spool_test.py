#!/usr/bin/env python3
"""The durable client spool end to end (README "Durable spool"): a
`perlctl load --spool DIR` client is killed with SIGKILL while its daemon is
frozen (SIGSTOP: nothing it sends is acknowledged), then started again on
the same DIR. The second client takes over the first one's client id,
replays what the daemon had not acknowledged and adds its own records. The
run's total must be exactly the records of every message the first client
spooled plus the second client's own -- nothing lost, nothing counted twice
-- and a clean close leaves the spool empty. Both spool modes.
"""
import argparse
import glob
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, check, finish, generate_stubs  # noqa: E402


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
        d = Daemon(args.perld, os.path.join(tmp, "state"), config)
        try:
            for mode in ("batched", "synced"):
                run = f"spool-{mode}"
                spool = os.path.join(tmp, f"spool-{mode}")
                base = [args.perlctl, "--target", d.grpc, "--json", "load", "-writers", "2",
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
                second = subprocess.run(base + ["-records", "1000"], capture_output=True,
                                        text=True, timeout=120)
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
        finally:
            d.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
