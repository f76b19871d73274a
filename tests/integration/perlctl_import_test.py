#!/usr/bin/env python3
"""`perlctl import` (issue 29; README "Import"): another tool's latencies
streamed into perld exactly, through the ordinary Ingest path.

  * fio: the REAL fio (Debian's package) runs two quick randrw jobs with
    write_lat_log and log_avg_msec=0 (one line per I/O); their _lat logs
    are imported (windows mode, ns) into NAME-read and NAME-write. For each
    direction perld's run holds exactly the log's I/Os: records == lines,
    bytes == the block sizes' sum, the exported distribution == the log's
    values pair for pair, and every percentile (0, 50, 90, 99, 99.9, 100)
    == the index rule over the log in Python; --distribution-out == the
    same. The _clat logs again in raw mode at --unit us: each value rounded
    to the nearest us, halves up, in Python; the rounded count reported ==
    Python's.
  * k6: k6 is not installable here, so its NDJSON is built from k6's
    documented format (grafana.com/docs/k6 "Results output / JSON": Metric
    lines, then Points; a duration is float64 milliseconds written as Go's
    encoding/json writes it, so 1e-07 for 0.1 ns) with other metrics'
    lines interleaved. Imported at --unit us: records, the distribution and
    every percentile == the Python oracle (Decimal, ROUND_HALF_UP), and
    the rounded count == Python's. --metric http_reqs (a counter) exits 2
    naming it; a metric without Points exits 2; neither opens a run.
  * malformed input (a k6 line cut short, a fio line with an unknown data
    direction, in the second file): exit 2 naming FILE:LINE, "nothing was
    sent", and perld has no run of that name.

  /usr/bin/python3 tests/integration/perlctl_import_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import decimal
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, check, exact_percentiles, finish  # noqa: E402

PERCENTS = [0, 50, 90, 99, 99.9, 100]
DIRECTIONS = {0: "read", 1: "write", 2: "trim", 3: "sync"}


def pkey(p):
    return str(int(p)) if p == int(p) else str(p)


def read_fio_logs(paths, unit_div=1):
    """{direction: {latency: count}}, {direction: bytes}, {direction: rounded}
    of fio latency logs, each value (ns) divided by unit_div and rounded to
    the nearest, halves up."""
    pairs, nbytes, rounded = {}, {}, {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                cols = [c.strip() for c in line.split(",")]
                value, ddir, bs = int(cols[1]), int(cols[2]), int(cols[3])
                q, r = divmod(value, unit_div)
                latency = q + (1 if 2 * r >= unit_div else 0)
                d = pairs.setdefault(ddir, {})
                d[latency] = d.get(latency, 0) + 1
                nbytes[ddir] = nbytes.get(ddir, 0) + bs
                rounded[ddir] = rounded.get(ddir, 0) + (1 if r else 0)
    return pairs, nbytes, rounded


def go_float(x):
    """A float64 as Go's encoding/json writes it: the shortest text that
    reads back as x, fixed notation for 1e-6 <= |x| < 1e21, else 1e-07."""
    if x == 0:
        return "0"
    if 1e-6 <= abs(x) < 1e21:
        s = format(decimal.Decimal(repr(x)), "f")
        return s[:-2] if s.endswith(".0") else s
    mantissa, exp = repr(x).split("e")
    exp = int(exp)
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def metric_line(name, mtype, contains):
    return json.dumps({"type": "Metric", "data": {
        "name": name, "type": mtype, "contains": contains, "thresholds": [],
        "submetrics": None}, "metric": name}, separators=(",", ":"))


def point_line(name, value_text, second, tags):
    # The value is spliced in as text: Go's spelling, not Python's.
    data = json.dumps({"time": f"2024-01-01T10:00:{second:02d}.123456789+01:00", "value": 0,
                       "tags": tags}, separators=(",", ":"))
    data = data.replace('"value":0', '"value":' + value_text)
    return '{"type":"Point","data":' + data + ',"metric":"' + name + '"}'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-import-")
    d = Daemon(args.perld, os.path.join(tmp, "state"), log=os.path.join(tmp, "perld.log"))
    try:
        ctl = [args.perlctl, "--target", d.grpc]

        def run(*argv, timeout=120):
            return subprocess.run(ctl + list(argv), capture_output=True, text=True,
                                  timeout=timeout)

        def run_names():
            p = run("--json", "runs")
            return [r["name"] for line in p.stdout.splitlines() if line.strip()
                    for r in json.loads(line)["runs"]]

        def wait_final(name):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                p = run("--json", "show", name)
                if p.returncode == 0:
                    shown = json.loads(p.stdout)
                    if shown["state"] != "running" and shown["total"].get("final"):
                        return shown
                time.sleep(0.1)
            check(False, f"run {name} ended")
            return None

        def expect_run(name, pairs, records, nbytes, what):
            """perld's run `name` holds exactly `pairs` ({latency: count})."""
            shown = wait_final(name)
            if shown is None:
                return
            want = sorted(pairs.items())
            total = shown["total"]
            check(total["records"] == records and total["validLatencyRecords"] == records and
                  (nbytes is None or total["bytes"] == nbytes),
                  f"{what}: run {name} holds {records} records, {nbytes} bytes "
                  f"({total['records']}, {total['bytes']})")
            p = run("export", name, "--format", "json")
            exported = json.loads(p.stdout) if p.returncode == 0 else {"latencies": []}
            check([tuple(x) for x in exported["latencies"]] == want,
                  f"{what}: run {name}'s exported distribution == the source's, pair for pair "
                  f"({len(exported['latencies'])} vs {len(want)} pairs)")
            p = run("--json", "percentiles", name, "--p", ",".join(pkey(x) for x in PERCENTS))
            got = json.loads(p.stdout)["percentiles"] if p.returncode == 0 else {}
            oracle = exact_percentiles(want, PERCENTS)
            check([got.get(pkey(x)) for x in PERCENTS] == oracle,
                  f"{what}: run {name}'s percentiles {PERCENTS} == the index rule over the "
                  f"source ({[got.get(pkey(x)) for x in PERCENTS]} vs {oracle})")

        def distribution_runs(path):
            with open(path) as f:
                return {r["run"]: r for r in json.load(f)["runs"]}

        # ---- fio: the real tool, one line per I/O ----
        fio = shutil.which("fio")
        check(fio is not None, "fio is installed (scripts/install-deps.sh)")
        if fio is None:
            return finish()
        fiodir = os.path.join(tmp, "fio")
        os.makedirs(fiodir)
        version = subprocess.run([fio, "--version"], capture_output=True, text=True).stdout
        check(version.startswith("fio-3"), f"fio 3.x writes latencies in ns ({version.strip()})")
        p = subprocess.run([fio, "--name=t", f"--directory={fiodir}", "--size=8M",
                            "--rw=randrw", "--bs=4k", "--ioengine=sync", "--numjobs=2",
                            f"--write_lat_log={os.path.join(fiodir, 'job')}",
                            "--log_avg_msec=0", "--runtime=2", "--time_based",
                            "--output=/dev/null"],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, f"fio ran ({p.stderr.strip()[-300:]})")
        lat_logs = sorted(os.path.join(fiodir, f) for f in os.listdir(fiodir)
                          if f.startswith("job_lat."))
        clat_logs = sorted(os.path.join(fiodir, f) for f in os.listdir(fiodir)
                           if f.startswith("job_clat."))
        check(len(lat_logs) == 2 and len(clat_logs) == 2,
              f"one _lat and one _clat log per job ({lat_logs}, {clat_logs})")
        pairs, nbytes, _ = read_fio_logs(lat_logs)
        lines = {k: sum(v.values()) for k, v in pairs.items()}
        check(set(pairs) == {0, 1} and min(lines.values()) > 1000,
              f"the logs hold reads and writes, one line per I/O ({lines})")

        dist = os.path.join(tmp, "fio-dist.json")
        p = run("--json", "import", "--format", "fio", *lat_logs, "--run", "fio",
                "--distribution-out", dist)
        check(p.returncode == 0, f"import --format fio exits 0 ({p.stderr.strip()[-300:]})")
        out = json.loads(p.stdout) if p.returncode == 0 else {"runs": []}
        by_run = {r["run"]: r for r in out["runs"]}
        check(sorted(by_run) == ["fio-read", "fio-write"] and out.get("mode") == "windows",
              f"one run per direction, windows mode by default ({sorted(by_run)})")
        dist_runs = distribution_runs(dist) if os.path.exists(dist) else {}
        for ddir, name in ((0, "fio-read"), (1, "fio-write")):
            r = by_run.get(name, {})
            check(r.get("records") == lines[ddir] and r.get("ackedRecords") == lines[ddir] and
                  r.get("acked") and r.get("roundedRecords") == 0 and
                  r.get("direction") == DIRECTIONS[ddir],
                  f"{name}: {lines[ddir]} records sent and acknowledged, none rounded ({r})")
            check(sorted(tuple(x) for x in dist_runs.get(name, {}).get("latencies", [])) ==
                  sorted(pairs[ddir].items()),
                  f"{name}: --distribution-out == the log's values")
            expect_run(name, pairs[ddir], lines[ddir], nbytes[ddir], "fio lat, windows, ns")
            shown = json.loads(run("--json", "show", name).stdout)
            check(shown["labels"].get("direction") == DIRECTIONS[ddir] and
                  shown["labels"].get("import") == "fio" and
                  shown["latencyConfig"]["timeUnit"] == "ns",
                  f"{name}: labels direction and import, unit ns ({shown['labels']})")

        # The completion latencies in raw mode at us: rounded, halves up.
        cpairs, cbytes, crounded = read_fio_logs(clat_logs, unit_div=1000)
        p = run("--json", "import", "--format", "fio", *clat_logs, "--run", "fio-clat",
                "--mode", "raw", "--unit", "us")
        check(p.returncode == 0, f"import of _clat logs, raw, us exits 0 "
              f"({p.stderr.strip()[-300:]})")
        out = json.loads(p.stdout) if p.returncode == 0 else {"runs": []}
        by_run = {r["run"]: r for r in out["runs"]}
        for ddir in (0, 1):
            name = f"fio-clat-{DIRECTIONS[ddir]}"
            records = sum(cpairs[ddir].values())
            check(by_run.get(name, {}).get("roundedRecords") == crounded[ddir],
                  f"{name}: {crounded[ddir]} values rounded to the us, as counted in Python "
                  f"({by_run.get(name, {}).get('roundedRecords')})")
            expect_run(name, cpairs[ddir], records, cbytes[ddir], "fio clat, raw, us")

        # ---- k6: NDJSON in k6's documented format ----
        rng = random.Random(29)
        k6_lines = [metric_line("vus", "gauge", "default"),
                    metric_line("http_reqs", "counter", "default"),
                    metric_line("http_req_duration", "trend", "time"),
                    metric_line("checks", "rate", "default")]
        values = []
        for i in range(3000):
            ns = rng.choice([rng.randint(50_000, 900_000), rng.randint(1_000_000, 2_000_000_000)])
            values.append(go_float(ns / 1e6))
        # Edges: 0, half a us (rounds up), just under, 0.1 ns (Go's 1e-07).
        values += ["0", go_float(0.0005), go_float(0.000499), go_float(1e-07), "1e-06"]
        for i, v in enumerate(values):
            tags = {"method": "GET", "status": "200", "url": f"http://test/{i % 7}"}
            k6_lines.append(point_line("http_reqs", "1", i % 60, tags))
            k6_lines.append(point_line("http_req_duration", v, i % 60, tags))
            if i % 100 == 0:
                k6_lines.append(point_line("vus", "10", i % 60, None))
        k6_file = os.path.join(tmp, "k6.json")
        with open(k6_file, "w") as f:
            f.write("\n".join(k6_lines) + "\n")
        kpairs, krounded = {}, 0
        for v in values:
            scaled = decimal.Decimal(v) * 1000
            us = int(scaled.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))
            krounded += 1 if scaled != scaled.to_integral_value() else 0
            kpairs[us] = kpairs.get(us, 0) + 1
        check(values[-4] == "0.0005" and values[-2] == "1e-07" and krounded > 0,
              f"the k6 values are Go's spellings ({values[-5:]}), some need rounding at us")
        kdist = os.path.join(tmp, "k6-dist.json")
        p = run("--json", "import", "--format", "k6", k6_file, "--run", "k6", "--unit", "us",
                "--distribution-out", kdist)
        check(p.returncode == 0, f"import --format k6 exits 0 ({p.stderr.strip()[-300:]})")
        out = json.loads(p.stdout) if p.returncode == 0 else {"runs": [{}]}
        r = out["runs"][0]
        check(r.get("run") == "k6" and r.get("records") == len(values) and
              r.get("ackedRecords") == len(values) and r.get("roundedRecords") == krounded,
              f"k6: {len(values)} Points sent and acknowledged, {krounded} rounded to the us "
              f"({r.get('records')}, {r.get('roundedRecords')})")
        dist_runs = distribution_runs(kdist) if os.path.exists(kdist) else {}
        check(sorted(tuple(x) for x in dist_runs.get("k6", {}).get("latencies", [])) ==
              sorted(kpairs.items()), "k6: --distribution-out == the oracle's us values")
        expect_run("k6", kpairs, len(values), 0, "k6 http_req_duration, windows, us")
        p = run("import", "--format", "k6", k6_file, "--run", "k6-human", "--unit", "us")
        check(p.returncode == 0 and f"{krounded} of them rounded from k6's ms to the nearest us "
              "(halves up)" in p.stdout, f"the human summary says what was rounded ({p.stdout})")

        # Not a trend: exit 2 naming the metric's type; no run opened.
        p = run("import", "--format", "k6", k6_file, "--run", "k6-counter", "--metric",
                "http_reqs")
        check(p.returncode == 2 and "metric 'http_reqs' is a counter, not a trend" in p.stderr
              and k6_file + ":2:" in p.stderr,
              f"--metric http_reqs exits 2 naming a counter ({p.returncode}, {p.stderr.strip()})")
        p = run("import", "--format", "k6", k6_file, "--run", "k6-none", "--metric", "nope")
        check(p.returncode == 2 and "no Point of metric 'nope'" in p.stderr,
              f"a metric without Points exits 2 ({p.returncode}, {p.stderr.strip()})")

        # ---- malformed input: nothing is sent, no run ----
        bad_k6 = os.path.join(tmp, "bad-k6.json")
        with open(bad_k6, "w") as f:
            f.write("\n".join(k6_lines[:50]) + "\n" + k6_lines[50][:40] + "\n" +
                    "\n".join(k6_lines[51:100]) + "\n")
        p = run("import", "--format", "k6", k6_file, bad_k6, "--run", "k6-bad")
        check(p.returncode == 2 and f"{bad_k6}:51: malformed JSON at column" in p.stderr and
              "nothing was sent (no run opened)" in p.stderr,
              f"a line cut short exits 2 naming FILE:LINE ({p.returncode}, {p.stderr.strip()})")
        bad_fio = os.path.join(tmp, "bad_lat.1.log")
        with open(lat_logs[0]) as f:
            good = f.read().splitlines()
        with open(bad_fio, "w") as f:
            f.write("\n".join(good[:200] + ["12, 3456, 9, 4096, 0"] + good[200:400]) + "\n")
        p = run("import", "--format", "fio", lat_logs[1], bad_fio, "--run", "fio-bad")
        check(p.returncode == 2 and f"{bad_fio}:201: column 3 (data direction)" in p.stderr and
              "nothing was sent" in p.stderr,
              f"an unknown data direction exits 2 naming FILE:LINE ({p.stderr.strip()})")
        names = run_names()
        check(not any(n.startswith(("k6-bad", "fio-bad", "k6-counter", "k6-none"))
                      for n in names),
              f"no run was opened for refused input ({names})")
        p = run("import", "--format", "fio", os.path.join(fiodir, "job_bw.1.log"), "--run", "x")
        check(p.returncode == 2, f"a missing file or a bandwidth log exits 2 ({p.stderr.strip()})")
        p = run("import", "--format", "csv", k6_file, "--run", "x")
        check(p.returncode == 2 and "--format must be fio, k6 or hlog" in p.stderr,
              "an unknown --format is a usage error")
    finally:
        d.stop()
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
