"""The live page's percentile spectrum (issue 28) in headless Chromium: GET
/api/spectrum answers the exact latency at a log-spaced ladder of percents
(each the double nearest its short decimal, 1/(1-p) up to the records, then
p100) -- the same numbers `perlctl percentiles --p` gives, for the total and
for a range of windows or times; the page draws exactly those points on a
log axis of 1/(1-p) (0%, 90%, 99%, 99.9%, ...), overlays a second run in
another colour with a legend, refuses to overlay a run in another unit,
redraws a range typed in, follows a running run, and shows p99.99, max, min
and avg beside the chart. Also the endpoint's errors. Run by Debian's
/usr/bin/python3 with python3-selenium and chromium-driver.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import (Daemon, check, chromium_available, finish,  # noqa: E402
                      headless_chromium)

LADDER_M = ["1", "1.25", "1.6", "2", "2.5", "3.2", "4", "5", "6.4", "8"]


def ladder(valid):
    """The percents /api/spectrum must use for `valid` records, from decimals."""
    if valid <= 0:
        return []
    out = []
    for d in range(13):
        for m in LADDER_M:
            x = Decimal(m) * (Decimal(10) ** d)
            if x > valid:
                return out + [100.0]
            out.append(float(Decimal(100) - Decimal(100) / x))
    return out + [100.0]


def http_json(address, path):
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=30) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        try:
            return e.code, json.loads(body)
        except ValueError:
            return e.code, body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    ap.add_argument("--artifacts", required=True)
    args = ap.parse_args()
    if not chromium_available():
        return finish()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    os.makedirs(args.artifacts, exist_ok=True)

    # The ladder itself, from decimals (the C++ builds it from strings).
    check(ladder(10) == [0, 20, 37.5, 50, 60, 68.75, 75, 80, 84.375, 87.5, 90, 100] and
          ladder(1) == [0, 100] and 99.99 in ladder(10_000) and 99.999 not in ladder(99_999),
          "the test's own ladder: ten percents a decade of 1/(1-p), then 100")

    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write("reportingIntervalMs: 300\n")
        d = Daemon(args.perld, os.path.join(tmp, "state"), config)

        def ctl(*cmd):
            p = subprocess.run([args.perlctl, "--target", d.grpc] + list(cmd),
                               capture_output=True, text=True, timeout=180)
            return p.returncode, p.stdout, p.stderr

        def bench_wait(name, *options):
            """The id of the run `name` shows: a paced run's response view (issue 30)."""
            rc, out, err = ctl("--json", "bench", *options, "--name", name, "--wait")
            check(rc == 0, f"bench {name} ran ({err.strip()[:120]})")
            if rc != 0:
                return 0
            run = json.loads(out.strip().splitlines()[-1])
            return run["responseRun"] or run["id"]

        def perlctl_percentiles(run, percents, *extra):
            rc, out, err = ctl("--json", "percentiles", run, "--p",
                               ",".join(repr(float(p)) for p in percents), *extra)
            return json.loads(out) if rc == 0 else {"error": err.strip()}

        driver = None
        try:
            # The endpoint's errors, JSON like /api/run's.
            for path, want in (("/api/spectrum", 400), ("/api/spectrum?id=x", 400),
                               ("/api/spectrum?run=no-such-run", 404),
                               ("/api/spectrum?id=999", 404)):
                status, body = http_json(d.http, path)
                check(status == want and isinstance(body, dict) and "error" in body,
                      f"{path} -> {want} with an error ({status}: {str(body)[:100]})")

            # A paced ns run of several windows, a saturating one, one in us.
            a = bench_wait("spec-a", "-writers", "1", "-size", "1024", "-throughput", "20",
                           "-seconds", "3", "-time", "ns")
            b = bench_wait("spec-b", "-writers", "2", "-size", "100", "-records", "200000",
                           "-time", "ns")
            c = bench_wait("spec-us", "-writers", "1", "-records", "5000", "-time", "mcs")

            # The total: the ladder's exact latencies, as perlctl answers them.
            status, spec = http_json(d.http, "/api/spectrum?run=spec-a")
            check(status == 200, f"/api/spectrum?run=spec-a -> 200 ({status})")
            valid = spec.get("validLatencyRecords", 0)
            points = spec.get("points", [])
            percents = [p["percent"] for p in points]
            lat = [p["latency"] for p in points]
            check(spec.get("run") == a and spec.get("unit") == "ns" and spec.get("exact") is True
                  and spec.get("final") is True and spec.get("scope") == "total" and
                  valid > 10_000 and spec.get("records") == valid,
                  f"spec-a: run {a}, ns, exact, final, {valid} valid records")
            check(percents == ladder(valid) and len(points) >= 40,
                  f"the points are the ladder for {valid} records ({len(points)} points, "
                  f"{percents[-3:]})")
            check(lat == sorted(lat) and lat[0] == spec["min"] and lat[-1] == spec["max"] and
                  spec["min"] < spec["max"],
                  f"latencies ascend from min {spec.get('min')} to max {spec.get('max')} (p100)")
            whole = perlctl_percentiles("spec-a", percents)
            got = whole.get("percentiles") or {}
            mismatched = [p for p, v in zip(percents, lat) if got.get(str(p)) != v]
            check(not mismatched and whole.get("validLatencyRecords") == valid,
                  f"every point equals perlctl percentiles --p ({len(percents)} percents; "
                  f"differing: {mismatched[:5]}; {str(whole)[:100] if mismatched else ''})")
            summary = spec.get("percentiles") or {}
            check(sorted(summary) == sorted(["50", "90", "99", "99.9", "99.99"]) and
                  all(summary[k] == got.get(k) for k in summary),
                  f"the summary p50 ... p99.99 are perlctl's too ({summary})")
            check(spec["min"] <= spec["avg"] <= spec["max"],
                  f"avg {spec.get('avg')} lies between min and max")

            # A range: windows, and times from the run's start.
            status, run_a = http_json(d.http, f"/api/run?id={a}")
            seqs = [w["seq"] for w in run_a.get("windows", []) if not w.get("warmup")]
            check(len(seqs) >= 4, f"spec-a has several windows ({seqs})")
            lo, hi = (seqs[1], seqs[-2]) if len(seqs) >= 4 else (1, 1)
            status, ranged = http_json(d.http, f"/api/spectrum?run=spec-a&windows={lo}-{hi}")
            rp = [p["percent"] for p in ranged.get("points", [])] if status == 200 else []
            theirs = perlctl_percentiles("spec-a", rp, "--windows", f"{lo}-{hi}")
            check(status == 200 and ranged.get("scope") == "range" and
                  ranged.get("firstWindow") == lo and ranged.get("lastWindow") == hi and
                  rp == ladder(ranged.get("validLatencyRecords", 0)) and
                  0 < ranged["validLatencyRecords"] < valid and
                  theirs.get("validLatencyRecords") == ranged["validLatencyRecords"] and
                  all((theirs.get("percentiles") or {}).get(str(p["percent"])) == p["latency"]
                      for p in ranged["points"]),
                  f"windows {lo}-{hi}: {ranged.get('validLatencyRecords')} records, the points "
                  f"equal perlctl --windows {lo}-{hi} ({status}, {str(theirs)[:80]})")
            start = run_a["run"]["startUnixMs"]
            status, timed = http_json(d.http, f"/api/spectrum?run={a}&from={start + 1000}")
            tp = [p["percent"] for p in timed.get("points", [])] if status == 200 else []
            theirs = perlctl_percentiles(str(a), tp, "--from", "1s")
            check(status == 200 and tp and
                  theirs.get("validLatencyRecords") == timed.get("validLatencyRecords") and
                  all((theirs.get("percentiles") or {}).get(str(p["percent"])) == p["latency"]
                      for p in timed["points"]),
                  f"from 1 s after the start: the points equal perlctl --from 1s ({status}, "
                  f"{timed.get('validLatencyRecords')} records)")
            for query, want in ((f"run={a}&windows=x", 400), (f"run={a}&windows=3-1", 400),
                                (f"run={a}&from=9&to=5", 400), (f"run={a}&windows=9999-", 404)):
                status, body = http_json(d.http, "/api/spectrum?" + query)
                check(status == want and isinstance(body, dict) and "error" in body,
                      f"?{query} -> {want} ({status}: {str(body)[:100]})")

            status, spec_b = http_json(d.http, "/api/spectrum?run=spec-b")
            check(status == 200 and spec_b.get("exact") and spec_b.get("points") and
                  spec_b["validLatencyRecords"] == 200000,
                  f"spec-b: 200000 records, exact ({status})")
            status, spec_c = http_json(d.http, "/api/spectrum?run=spec-us")
            check(status == 200 and spec_c.get("unit") == "us", f"spec-us is in us ({status})")

            driver = headless_chromium(height=1600)
            driver.get(f"http://{d.http}/#run={a}")

            def drawn():
                """The drawn points: (run, percent, latency, cx, cy), in order."""
                return [tuple(x) for x in driver.execute_script(
                    "return [...document.querySelectorAll('#chart-spectrum .spectrum-point')]"
                    ".map(c => [Number(c.dataset.run), Number(c.dataset.percent),"
                    " Number(c.dataset.latency), Number(c.getAttribute('cx')),"
                    " Number(c.getAttribute('cy'))])")]

            def texts(selector):
                return driver.execute_script(
                    f"return [...document.querySelectorAll({json.dumps(selector)})]"
                    ".map(e => e.textContent)")

            def wait_for(condition, seconds=20):
                deadline = time.time() + seconds
                while time.time() < deadline:
                    if condition():
                        return True
                    time.sleep(0.2)
                return condition()

            def of_run(run, got):
                return [(p, v) for r, p, v, _, _ in got if r == run]

            want_a = [(p["percent"], p["latency"]) for p in points]
            wait_for(lambda: of_run(a, drawn()) == want_a)
            got = drawn()
            check(of_run(a, got) == want_a and len(got) == len(want_a),
                  f"the chart draws spec-a's {len(want_a)} points with /api/spectrum's values "
                  f"({len(got)} drawn)")
            xs = [g[3] for g in got]
            ys = [g[4] for g in got]
            check(all(x1 <= x2 for x1, x2 in zip(xs, xs[1:])) and xs[-1] - xs[0] > 300 and
                  all(y1 >= y2 for y1, y2 in zip(ys, ys[1:])) and ys[0] - ys[-1] > 100,
                  f"x grows with the percent, y with the latency (x {xs[0]:.0f}..{xs[-1]:.0f},"
                  f" y {ys[0]:.0f}..{ys[-1]:.0f})")
            ticks = texts("#chart-spectrum .spectrum-tick")
            check(ticks[:4] == ["0%", "90%", "99%", "99.9%"] and "99.99%" in ticks,
                  f"the x axis is labelled by 1/(1-p) decades ({ticks})")

            def row(run):
                return driver.execute_script(
                    "const r = document.querySelector("
                    f"'#spectrum-table tbody tr[data-run=\"{run}\"]');"
                    "if (!r) return null; const o = {};"
                    "for (const td of r.children) o[td.dataset.field] = td.textContent;"
                    "return o;")
            cells = row(a) or {}
            want_cells = {"p99.99": f"{summary.get('99.99')} ns", "max": f"{spec['max']} ns",
                          "min": f"{spec['min']} ns", "p99": f"{summary.get('99')} ns"}
            check(all(cells.get(k) == v for k, v in want_cells.items()) and
                  abs(float(cells.get("avg", "0 ns").split()[0]) -
                      float(f"{spec['avg']:.6g}")) < 1e-9,
                  f"beside the chart: p99.99, max, min and avg of spec-a ({cells})")

            # Compare with spec-b: overlaid in another colour, with a legend.
            Select(driver.find_element(By.ID, "compare-run")).select_by_value(str(b))
            want_b = [(p["percent"], p["latency"]) for p in spec_b["points"]]
            wait_for(lambda: of_run(b, drawn()) == want_b)
            got = drawn()
            check(of_run(b, got) == want_b and of_run(a, got) == want_a,
                  f"spec-b overlaid: its {len(want_b)} points beside spec-a's")
            strokes = driver.execute_script(
                "return [...document.querySelectorAll('#chart-spectrum .spectrum-line')]"
                ".map(p => [Number(p.dataset.run), p.getAttribute('stroke')])")
            check(len(strokes) == 2 and strokes[0][1] != strokes[1][1] and
                  {s[0] for s in strokes} == {a, b},
                  f"two lines in two colours ({strokes})")
            legend = texts("#spectrum-legend span")
            check(len(legend) == 2 and "spec-a" in legend[0] and "spec-b" in legend[1],
                  f"the legend names both runs ({legend})")
            cells_b = row(b) or {}
            check(cells_b.get("max") == f"{spec_b['max']} ns" and
                  cells_b.get("p99.99") == f"{spec_b['percentiles']['99.99']} ns",
                  f"spec-b's p99.99 and max beside the chart ({cells_b})")

            # Another unit: said, not overlaid.
            Select(driver.find_element(By.ID, "compare-run")).select_by_value(str(c))
            wait_for(lambda: "not overlaid" in texts("#spectrum-note")[0])
            note = texts("#spectrum-note")[0]
            got = drawn()
            check("not overlaid" in note and " us" in note and not of_run(c, got) and
                  not of_run(b, got) and of_run(a, got) == want_a and
                  len(texts("#spectrum-legend span")) == 1,
                  f"a run in us is not overlaid on ns, and the page says so ({note!r})")
            Select(driver.find_element(By.ID, "compare-run")).select_by_value("")

            # A range typed in: the range's points; "total" goes back.
            driver.find_element(By.ID, "range-windows").send_keys(f"{lo}-{hi}")
            driver.find_element(By.ID, "range-apply").click()
            want_r = [(p["percent"], p["latency"]) for p in ranged["points"]]
            wait_for(lambda: of_run(a, drawn()) == want_r)
            check(of_run(a, drawn()) == want_r and
                  f"windows {lo}-{hi}" in texts("#spectrum-state")[0],
                  f"windows {lo}-{hi} typed in: the range's {len(want_r)} points "
                  f"({texts('#spectrum-state')})")
            shot = os.path.join(args.artifacts, "live_spectrum.png")
            driver.save_screenshot(shot)
            check(os.path.getsize(shot) > 10_000, f"screenshot saved: {shot}")
            driver.find_element(By.ID, "range-clear").click()
            wait_for(lambda: of_run(a, drawn()) == want_a)
            check(of_run(a, drawn()) == want_a, "\"total\" draws the total again")

            # A running run: its spectrum follows its total.
            rc, out, err = ctl("--json", "bench", "-writers", "1", "-size", "1024",
                               "-throughput", "2", "-seconds", "60", "-time", "ns",
                               "--name", "spec-live")
            live = json.loads(out)["id"] if rc == 0 else 0
            check(rc == 0, f"a running bench ({err.strip()[:100]})")
            driver.get(f"http://{d.http}/#run={live}")

            def live_records():
                return driver.execute_script(
                    "const r = document.querySelector("
                    f"'#spectrum-table tbody tr[data-run=\"{live}\"]');"
                    "return r ? Number(r.dataset.records) : -1;")
            wait_for(lambda: live_records() > 0)
            first = live_records()
            wait_for(lambda: live_records() > first)
            second = live_records()
            status, now = http_json(d.http, f"/api/spectrum?id={live}")
            check(0 < first < second and status == 200 and now.get("final") is False and
                  now.get("exact") and "running" in texts("#spectrum-state")[0],
                  f"the running run's spectrum is redrawn as its total grows "
                  f"({first} -> {second} records)")
            ctl("stop", str(live), "--wait")
        finally:
            if driver is not None:
                driver.quit()
            d.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
