#!/usr/bin/env python3
"""Aggregated windows report the clients' rate, not the daemon window's
(issue 26; README "Rates of aggregated windows"; daemon/runs/window_rate.h).

Three `perlctl load --mode windows` clients, rate-controlled at 1024
records/s each (-size 1024 -throughput 1) for 3.3 s, one run with a 1 s
interval. The run's last window is ~0.3 s long and holds the clients' last
full windows: records over the daemon's seconds reads ~9,000 records/s there
(checked, so the case this test guards is really present). Every periodic
window's records/s -- in `perlctl --json history`, `/api/run` and the CSV the
daemon writes -- stays within 30% of what the clients sent (3,072/s), and
`/metrics`' perld_run_records_per_second (the latest window) too while the
run ends.

  /usr/bin/python3 tests/integration/window_rate_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, check, finish  # noqa: E402

CLIENTS = 3
PER_CLIENT = 1024  # records/s: -size 1024 -throughput 1 (MB/s, 1 MB = 2^20 B)
TARGET = CLIENTS * PER_CLIENT


def http_get(addr, path):
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=10) as r:
        return r.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-window-rate-")
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write(f"csvDir: {tmp}/csv\n")
    d = Daemon(args.perld, os.path.join(tmp, "state"), config=config,
               log=os.path.join(tmp, "perld.log"))
    try:
        ctl = [args.perlctl, "--target", d.grpc]
        clients = [subprocess.Popen(
            ctl + ["load", "--mode", "windows", "--run", "rates", "--name", f"node-{i}",
                   "-writers", "1", "-size", "1024", "-throughput", "1", "-seconds", "3.3",
                   "-interval", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(CLIENTS)]
        for c in clients:
            out, err = c.communicate(timeout=120)
            check(c.returncode == 0, f"a windows-mode client ends acknowledged: {err.strip()[-300:]}")

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            h = subprocess.run(ctl + ["--json", "history", "rates"], capture_output=True,
                               text=True, timeout=30)
            history = json.loads(h.stdout) if h.returncode == 0 else {}
            if any(w["kind"] == "total" and w.get("final") for w in history.get("windows", [])):
                break
            time.sleep(0.2)
        windows = [w for w in history.get("windows", []) if w["kind"] == "periodic"]
        check(len(windows) >= 3, f"the run has its periodic windows ({len(windows)})")
        naive = max(w["records"] / w["seconds"] for w in windows if w["seconds"] > 0)
        shown = [round(w["recordsPerSecond"]) for w in windows]
        print(f"windows (seconds, records, records/s): "
              f"{[(round(w['seconds'], 2), w['records'], r) for w, r in zip(windows, shown)]}; "
              f"records/seconds at most {naive:.0f}")
        check(naive > 2 * TARGET,
              f"a short window holds the clients' full windows (records/seconds {naive:.0f})")
        check(max(shown) <= 1.3 * TARGET,
              f"perlctl history: no window above 1.3 x {TARGET} records/s ({max(shown)})")
        check(all(abs(w["records"] / w["rateSeconds"] - w["recordsPerSecond"]) <=
                      1e-6 * w["recordsPerSecond"] for w in windows),
              "every window's recordsPerSecond is records / rateSeconds")

        run_id = history["run"]
        api = json.loads(http_get(d.http, f"/api/run?id={run_id}"))
        api_rates = [w["recordsPerSecond"] for w in api["windows"]]
        check(len(api_rates) == len(windows) and max(api_rates) <= 1.3 * TARGET,
              f"/api/run: the same windows, none above 1.3 x target ({max(api_rates):.0f})")
        check(all("rateSeconds" in w for w in api["windows"]), "/api/run windows carry rateSeconds")

        metrics = http_get(d.http, "/metrics")
        m = re.search(r'^perld_run_records_per_second\{run_id="%s"[^}]*\} (\S+)$' % run_id,
                      metrics, re.M)
        if m:  # an ended run may have left /metrics already
            check(float(m.group(1)) <= 1.3 * TARGET,
                  f"/metrics: the latest window's rate {float(m.group(1)):.0f}")

        csv_rates = []
        for root, _, files in os.walk(os.path.join(tmp, "csv")):
            for name in files:
                with open(os.path.join(root, name)) as f:
                    for row in csv.DictReader(f):
                        if row["Type"] == "Regular":
                            csv_rates.append(float(row["Records/Sec"]))
        check(len(csv_rates) == len(windows) and max(csv_rates) <= 1.3 * TARGET,
              f"the run's CSV: {len(csv_rates)} windows, at most {max(csv_rates or [0]):.0f}/s")
    finally:
        d.stop()
    finish()


if __name__ == "__main__":
    main()
