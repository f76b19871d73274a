"""The live page in a real browser (issue 11): headless Chromium, driven by
Debian's python3-selenium and chromium-driver, loads perld's page on
loopback while a bench runs; the rendered DOM shows the run, its records/s
chart gains points between two reads, the total's percentile table fills,
and a screenshot is saved as the test's artefact. Also the JSON endpoints'
errors (bad id, unknown run). Run by Debian's /usr/bin/python3.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import (Daemon, check, chromium_available, finish,  # noqa: E402
                      headless_chromium)


def http_status(address, path):
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    ap.add_argument("--artifacts", required=True)
    args = ap.parse_args()
    if not chromium_available():
        return finish()
    from selenium.webdriver.common.by import By
    os.makedirs(args.artifacts, exist_ok=True)

    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write("reportingIntervalMs: 400\n")
        d = Daemon(args.perld, os.path.join(tmp, "state"), config)

        def ctl(*cmd):
            p = subprocess.run([args.perlctl, "--target", d.grpc] + list(cmd),
                               capture_output=True, text=True, timeout=120)
            return p.returncode, p.stdout, p.stderr

        driver = None
        try:
            status, body = http_status(d.http, "/")
            check(status == 200 and "<svg id=\"chart-rate\"" in body and "http://" not in
                  body.replace("http://www.w3.org/2000/svg", ""),
                  "/ serves the self-contained page (no external assets)")
            check(http_status(d.http, "/api/run?id=x")[0] == 400, "/api/run?id=x -> 400")
            status, body = http_status(d.http, "/api/run?id=999")
            check(status == 404 and "error" in json.loads(body), "/api/run?id=999 -> 404 JSON")

            # A paced run that lasts longer than the test reads the page.
            rc, out, err = ctl("--json", "bench", "-writers", "1", "-size", "1024",
                               "-throughput", "20", "-seconds", "60", "-time", "ns",
                               "--name", "live <b>test</b>", "--slo", "invalid=0,p99<=60s")
            check(rc == 0, f"bench started ({err.strip()[:100]})")
            run_id = json.loads(out)["id"] if rc == 0 else 0
            view_id = json.loads(out)["responseRun"] if rc == 0 else 0
            # A paced run's name shows its response view (issue 30); kind=service the run.
            status, body = http_status(d.http, "/api/run?run=" +
                                       urllib.parse.quote("live <b>test</b>"))
            check(status == 200 and json.loads(body)["run"]["id"] == view_id,
                  f"/api/run?run=NAME answers for the run of that name ({status})")
            status, body = http_status(d.http, "/api/run?kind=service&run=" +
                                       urllib.parse.quote("live <b>test</b>"))
            check(status == 200 and json.loads(body)["run"]["id"] == run_id,
                  f"/api/run?run=NAME&kind=service answers for the run itself ({status})")
            status, body = http_status(d.http, "/api/run?run=no-such-run")
            check(status == 404 and "error" in json.loads(body), "/api/run?run=unknown -> 404")

            # One JSON vocabulary with perlctl --json: camelCase keys.
            def keys(value):
                if isinstance(value, dict):
                    for k, v in value.items():
                        yield k
                        yield from keys(v)
                elif isinstance(value, list):
                    for v in value:
                        yield from keys(v)
            api = [json.loads(http_status(d.http, path)[1])
                   for path in ("/api/runs", f"/api/run?id={run_id}")]
            snake = sorted({k for doc in api for k in keys(doc) if "_" in k})
            check(not snake and api[0].get("uptimeSeconds") is not None and
                  "startUnixMs" in api[1]["run"] and "recordsPerSecond" in api[1]["run"],
                  f"/api/* keys are camelCase like perlctl --json's (snake_case: {snake})")

            driver = headless_chromium()
            driver.get(f"http://{d.http}/#run={run_id}")

            def points():
                return len(driver.find_elements(By.CSS_SELECTOR, "#chart-rate .point"))

            deadline = time.time() + 30
            while time.time() < deadline and not (
                    "live <b>test</b>" in driver.find_element(By.ID, "runs").text and
                    points() >= 2):
                time.sleep(0.2)
            runs_text = driver.find_element(By.ID, "runs").text
            check("live <b>test</b>" in runs_text,
                  "the runs table shows the run's name as text (escaped, not markup)")
            first = points()
            check(first >= 2, f"the records/s chart has points ({first})")
            deadline = time.time() + 20
            while time.time() < deadline and points() <= first:
                time.sleep(0.2)
            second = points()
            check(second > first, f"the chart grows between two reads ({first} -> {second})")
            rows = driver.find_elements(By.CSS_SELECTOR, "#total-table tbody tr")
            check(len(rows) >= 4, f"the total's percentile table has rows ({len(rows)})")
            lines = driver.find_elements(By.CSS_SELECTOR, "#chart-latency path")
            check(len(lines) >= 1, f"the latency chart has lines ({len(lines)})")
            # A rate-controlled run says which time it shows and links its other view.
            kind_text = driver.find_element(By.ID, "run-kind").text
            link = driver.find_element(By.CSS_SELECTOR, "#run-kind a").get_attribute("href")
            check(kind_text.startswith("service time (end \u2212 actual start) of a "
                                       "rate-controlled run at") and
                  link.endswith(f"#run={view_id}") and
                  re.search(r"schedule: [1-9][\d.]*( [kMG])? operations", kind_text) is not None,
                  f"the run's kind, its response view's link and its schedule ({kind_text!r})")
            # The run's SLO as perld evaluates it, line for line as the API says.
            # The page refreshes on its own: read both until they show the
            # same window (bounded), then compare them.
            for _ in range(20):
                slo = json.loads(http_status(d.http, f"/api/run?id={run_id}")[1])["run"]["slo"]
                shown = driver.find_element(By.ID, "run-slo").text
                if f"evaluated at window {slo['window']}" in shown:
                    break
                time.sleep(0.25)
            check(slo["state"] == "holding" and
                  shown.startswith("SLO holding: invalid=0,p99<=60s") and
                  all(v["line"] in shown for v in slo["verdicts"]) and len(slo["verdicts"]) == 2,
                  f"the page shows the run's SLO and each verdict ({shown!r})")
            # What a reader needs beside the charts (issue 26).
            # Read in one script: the page re-renders every second (stale elements).
            def texts(selector):
                return driver.execute_script(
                    f"return [...document.querySelectorAll({json.dumps(selector)})]"
                    ".map(e => e.textContent)")
            header = " ".join(texts("#runs thead th"))
            cells = texts("#runs tbody td")
            check("started (UTC)" in header and "duration" in header and
                  any(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", c) for c in cells),
                  f"the runs list shows start (UTC) and duration ({header!r})")
            facts = texts("#run-facts")[0]
            check(facts.startswith("started ") and "Z" in facts and
                  "parameters: -writers 1" in facts,
                  f"the run shows its start, duration and parameters ({facts[:120]!r})")
            names = texts("#total-table tbody tr td:first-child")
            check(names[:1] == ["min"] and names[-2:] == ["max", "avg"] and "99.99" in names,
                  f"the total table shows min, the percentiles (p99.99 too), max and avg "
                  f"({names})")
            ticks = texts("#chart-rate .tick")
            check(len(ticks) == 5 and all(re.fullmatch(r"\d\d:\d\d:\d\d", t) for t in ticks),
                  f"the time axis: five 24-hour UTC ticks ({ticks})")
            tips = texts("#chart-latency circle title")
            check(tips and re.fullmatch(r"p\S+ at \d\d:\d\d:\d\d UTC: \d+ ns", tips[0]),
                  f"every latency point has its exact value as a tooltip ({tips[:1]})")
            strokes = driver.execute_script(
                "return [...document.querySelectorAll('#chart-latency path')]"
                ".map(p => p.getAttribute('stroke'))")
            check("#d98a00" in strokes and "#2f6fdf" in strokes,
                  f"p50 and p99 keep their colours from run to run ({strokes})")
            shot = os.path.join(args.artifacts, "live_page.png")
            driver.save_screenshot(shot)
            check(os.path.getsize(shot) > 10_000, f"screenshot saved: {shot}")

            # Beyond 50 runs: pages of 50, newest first, and a filter. With the
            # paced run and its response view, 57 runs.
            for i in range(55):
                rc, _, _ = ctl("bench", "-writers", "1", "-records", "100", "-time", "ns",
                               "--name", f"many-{i}")
            deadline = time.time() + 20
            while time.time() < deadline and "of 57" not in texts("#runs-page")[0]:
                time.sleep(0.2)
            rows = texts("#runs tbody tr td:first-child")
            check(texts("#runs-page")[0] == "1\u201350 of 57" and len(rows) == 50 and
                  rows[0] == "57",
                  f"57 runs: the newest 50 on the first page ({texts('#runs-page')}, "
                  f"{len(rows)} rows)")
            driver.find_element(By.ID, "runs-next").click()
            rows = texts("#runs tbody tr td:first-child")
            check(texts("#runs-page")[0] == "51\u201357 of 57" and
                  rows == [str(i) for i in range(7, 0, -1)],
                  f"the next page: the oldest 7 ({rows})")
            box = driver.find_element(By.ID, "runs-filter")
            box.send_keys("many-4")
            rows = texts("#runs tbody tr td:nth-child(2)")
            check(sorted(rows) == sorted(["many-4"] + [f"many-4{i}" for i in range(10)]) and
                  "(of 57 runs)" in texts("#runs-page")[0],
                  f"the filter shows the matching runs only ({rows})")

            # The page notices a daemon that went away.
            rc, _, _ = ctl("stop", str(run_id), "--wait")
            check(rc == 0, "run stopped")
            d.stop()
            deadline = time.time() + 15
            notice = driver.find_element(By.ID, "notice")
            while time.time() < deadline and not notice.is_displayed():
                time.sleep(0.2)
            check(notice.is_displayed(), "a stopped daemon shows the disconnected notice")
        finally:
            if driver is not None:
                driver.quit()
            if d.proc.poll() is None:
                d.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
