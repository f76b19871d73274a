"""perld as a systemd service, without systemd as PID 1:

- `systemd-analyze verify` accepts deploy/perld.service (ExecStart pointed at
  the built binary, which is what verify checks exists);
- the notify protocol: the test owns NOTIFY_SOCKET (a Unix datagram socket it
  reads) and sets WATCHDOG_USEC; READY=1 arrives only once the listeners
  accept (/healthz answers when READY is read), WATCHDOG=1 keeps coming at
  about the configured rate (half the period), SIGHUP gives RELOADING=1 then
  READY=1 (and ten SIGHUPs during a running exact-count bench lose no
  record), SIGTERM gives STOPPING=1 and exit 0;
- without NOTIFY_SOCKET the daemon runs unchanged (every other test);
- every config/examples/*.yaml passes `perld --check-config`.

  /usr/bin/python3 tests/integration/systemd_test.py --perld build/release/daemon/bench/perld \
      --unit deploy/perld.service
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import check  # noqa: E402

WATCHDOG_USEC = 400_000  # pings every 200 ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--unit", required=True)
    ap.add_argument("--examples", help="config/examples: each must pass --check-config")
    ap.add_argument("--perlctl", help="with it: reloads during a running bench lose nothing")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-systemd-")

    # 1. The unit file.
    if shutil.which("systemd-analyze"):
        unit = os.path.join(tmp, "perld.service")
        with open(args.unit) as f, open(unit, "w") as out:
            out.write(f.read().replace("/usr/bin/perld", os.path.abspath(args.perld)))
        r = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True)
        check(r.returncode == 0 and r.stderr.strip() == "",
              f"systemd-analyze verify perld.service ({r.returncode}: {r.stderr.strip()})")
        text = open(args.unit).read()
        for key in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "StateDirectory=perld",
                    "ConfigurationDirectory=perld", "DynamicUser=yes", "ProtectSystem=strict",
                    "ProtectHome=yes", "NoNewPrivileges=yes", "PrivateTmp=yes",
                    "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
                    "SystemCallFilter=@system-service", "ExecReload=/bin/kill -HUP $MAINPID"):
            check(key in text, f"the unit sets {key}")
    else:
        print("skip: systemd-analyze is not installed")

    # Every shipped configuration example passes `perld --check-config`.
    if args.examples:
        for name in sorted(os.listdir(args.examples)):
            r = subprocess.run([args.perld, "--check-config",
                                os.path.join(args.examples, name)], capture_output=True, text=True)
            check(r.returncode == 0 and "grpcListen" in r.stdout,
                  f"perld --check-config config/examples/{name} ({r.returncode}: "
                  f"{r.stderr.strip()[:200]})")

    # 2. The notify protocol.
    path = os.path.join(tmp, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    messages = []  # (monotonic time, text)
    lock = threading.Lock()
    done = threading.Event()

    def read():
        while not done.is_set():
            try:
                data = sock.recv(4096)
            except socket.timeout:
                continue
            with lock:
                messages.append((time.monotonic(), data.decode()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def wait_for(pattern, after=0, seconds=30):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with lock:
                for i, (t, m) in enumerate(messages[after:], start=after):
                    if re.search(pattern, m, re.M):
                        return i, t
            time.sleep(0.01)
        return None, None

    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC=str(WATCHDOG_USEC))
    env.pop("WATCHDOG_PID", None)  # unset: the watchdog is meant for whoever reads it
    proc = subprocess.Popen([args.perld, "--grpc-listen", "127.0.0.1:0", "--http-listen",
                             "127.0.0.1:0", "--state-dir", os.path.join(tmp, "state")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        ready, _ = wait_for(r"^READY=1")
        check(ready is not None, "READY=1 is sent")
        http = grpc = None
        for _ in range(2):
            m = re.match(r"perld: (gRPC|HTTP) listening on (\S+)", proc.stdout.readline())
            if m and m.group(1) == "HTTP":
                http = m.group(2)
            elif m:
                grpc = m.group(2)
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        body = urllib.request.urlopen(f"http://{http}/healthz", timeout=5).read()
        check(body == b"ok\n", "the listeners accept when READY=1 has been sent")
        with lock:
            before_ready = [m for _, m in messages[:ready]]
        check(not any("WATCHDOG=1" in m for m in before_ready), "no watchdog ping before READY")
        check("STATUS=gRPC on 127.0.0.1:" in messages[ready][1], "READY carries a STATUS line")

        time.sleep(2.0)
        with lock:
            pings = [t for t, m in messages if m == "WATCHDOG=1"]
        # Every 200 ms over ~2 s: about 10. Bounds only catch a missing or
        # runaway watchdog; the rate is not a timing assertion.
        check(5 <= len(pings) <= 40, f"WATCHDOG=1 about every WATCHDOG_USEC/2 ({len(pings)} in 2 s)")

        mark = len(messages)
        proc.send_signal(signal.SIGHUP)
        reloading, _ = wait_for(r"^RELOADING=1", after=mark)
        check(reloading is not None, "SIGHUP: RELOADING=1")
        again, _ = wait_for(r"^READY=1", after=(reloading or mark) + 1)
        check(again is not None, "SIGHUP: READY=1 again once reloaded")

        # `systemctl reload` (SIGHUP) during a running run loses no record:
        # an exact-count bench at full speed, up to ten reloads while it runs.
        if args.perlctl:
            records = 20_000_000
            bench = subprocess.Popen(
                [args.perlctl, "--target", grpc, "--json", "--timeout", "300", "bench",
                 "-writers", "2", "-records", str(records), "-time", "ns", "--wait"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            reloads = 0
            while bench.poll() is None and reloads < 10:
                time.sleep(0.15)
                proc.send_signal(signal.SIGHUP)
                reloads += 1
            out, err = bench.communicate(timeout=120)
            lines = out.strip().splitlines()
            total = json.loads(lines[-1]).get("total", {}) if lines else {}
            check(bench.returncode == 0 and total.get("records") == records and
                  total.get("invalidLatencyRecords") == 0,
                  f"{reloads} reloads during a running bench: every record counted "
                  f"({total.get('records')} of {records}; {err.strip()[:200]})")

        mark = len(messages)
        proc.send_signal(signal.SIGTERM)
        stopping, _ = wait_for(r"^STOPPING=1", after=mark)
        check(stopping is not None, "SIGTERM: STOPPING=1")
        check(proc.wait(timeout=60) == 0, "the daemon exits 0")
    finally:
        if proc.poll() is None:
            proc.kill()
        done.set()
        reader.join()
    return perld_it.finish()


if __name__ == "__main__":
    sys.exit(main())
