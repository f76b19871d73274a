"""perlctl's human output people can read (issue 26): a window is a few lines
-- counts and rates, latency min/avg/max, a percentile ladder within 100
columns with every value's unit -- `--p LIST` on show/history/watch/bench
--wait (`show --p` asks the daemon, so any percentile is exact; 0 is the
minimum, 100 the maximum), SBK's one-line form behind `--sbk`, times in UTC
with their Z, a hint when every percentile reads 0 in the run's unit, and
`runs` showing each run's result (parameters behind --wide), -interval in
fractions of a second, a hint for SBK options perld does not take, and a
bench run's progress (N of M records or S of T seconds, ETA) in bench --wait,
`perlctl check RUN --slo` gates (exit codes, JUnit parsed by an XML
parser), `perlctl compare A B [--fail-if]` and `perlctl export` (JSON, CSV,
.hgrm read back and checked against the daemon's exact percentiles).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, check, exact_percentiles, finish  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-out-")
    d = Daemon(args.perld, os.path.join(tmp, "state"))

    def ctl(*cmd):
        p = subprocess.run([args.perlctl, "--target", d.grpc] + list(cmd), capture_output=True,
                           text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    rc, out, err = ctl("bench", "-writers", "1", "-records", "300000", "-time", "ns",
                       "-interval", "1", "--name", "out", "--wait", "--p", "50,99")
    lines = out.splitlines()
    check(rc == 0 and all(len(line) <= 100 for line in lines),
          f"bench --wait: every line within 100 columns ({max(map(len, lines or ['']))}; "
          f"{err.strip()[:120]})")
    ladders = [line for line in lines if re.search(r"\bp\d", line)]
    check(ladders and all(re.fullmatch(r"\s+(p(50|99) \d+ ns\s*)+", line) for line in ladders),
          f"bench --wait --p 50,99: the ladders show p50 and p99 only, each with its unit "
          f"({ladders[:2]})")

    rc, out, _ = ctl("show", "out")
    check(rc == 0 and "total (final)" in out and "latency: min " in out and
          all(len(line) <= 100 for line in out.splitlines()),
          "show: the total in a few lines, within 100 columns")
    check(re.search(r"p99\.99 \d+ ns", out) is not None, "show: the ladder carries the unit")
    check(re.search(r"started:  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", out) is not None,
          "show: times in UTC with their Z, as the daemon's log")

    # SBK's defaults (ms) on a fast machine: every percentile is 0 -- say so.
    rc, out, _ = ctl("bench", "-writers", "1", "-records", "100000", "--name", "zero", "--wait")
    check(rc == 0 and "every percentile is 0 ms" in out and "-time ns" in out,
          "a run whose percentiles all read 0 ms says why and suggests -time ns")

    rc, out, _ = ctl("--json", "show", "out")
    total = json.loads(out)["total"] if rc == 0 else {}
    rc, text, _ = ctl("show", "out", "--p", "0,p50,100,99.999")
    ladder = dict(re.findall(r"p([\d.]+) (\d+) ns", text.split("total")[-1]))
    check(rc == 0 and int(ladder.get("0", -1)) == total.get("minLatency") and
          int(ladder.get("100", -1)) == total.get("maxLatency") and "99.999" in ladder,
          f"show --p 0,p50,100,99.999: p0 is the min, p100 the max, any percentile "
          f"({ladder}, min {total.get('minLatency')}, max {total.get('maxLatency')})")

    rc, out, _ = ctl("percentiles", "out", "--p", "50,99.9")
    check(rc == 0 and re.search(r"^\s+p50\s+\d+ ns\s+\(\d+ records", out, re.M) and
          re.search(r"^\s+p99\.9\s+\d+ ns", out, re.M),
          f"percentiles: every value with its unit ({out.strip()[-160:]!r})")
    rc, out, _ = ctl("--json", "percentiles", "out", "--p", "50")
    check(rc == 0 and json.loads(out).get("timeUnit") == "ns", "--json percentiles: timeUnit")
    rc, out, _ = ctl("show", "out", "--sbk")
    check(rc == 0 and "Latency Percentiles:" in out and "99.99th" in out,
          "show --sbk: SBK's one-line form")
    rc, out, _ = ctl("history", "out", "--p", "99")
    check(rc == 0 and "periodic 1" in out and not re.search(r"\bp50 ", out) and
          re.search(r"p99 \d+ ns", out) is not None, "history --p 99: only p99")
    rc, out, _ = ctl("history", "out", "--p", "12.345")
    check(rc == 0 and "not in this window's set: 12.345" in out,
          "history --p outside the run's set: says so and how to ask")

    # runs: each run's result, not its parameters (--wide adds them).
    rc, out, _ = ctl("runs")
    rows = {line.split()[1]: line for line in out.splitlines()[1:]}
    want = (rf"\d+\s+out\s+finished\s+\S+Z\s+[\d.]+\s+{total.get('records')}\s+\d+\s+"
            rf"\d+ ns\s+\d+ ns\s+{total.get('maxLatency')} ns")
    check(rc == 0 and out.split()[:10] == ["ID", "NAME", "STATE", "STARTED", "SECONDS", "RECORDS",
                                           "RECORDS/S", "P50", "P99", "MAX"] and
          re.fullmatch(want, rows.get("out", "")) is not None and "-writers" not in out,
          f"runs: records, seconds, rate, p50, p99 and max with units ({rows.get('out')!r})")
    rc, out, _ = ctl("runs", "--wide")
    check(rc == 0 and "PARAMETERS" in out and "-records 300000" in out,
          "runs --wide: source, end and parameters too")
    rc, out, _ = ctl("--json", "runs")
    listed = {r["name"]: r for r in json.loads(out)["runs"]} if rc == 0 else {}
    check(listed.get("out", {}).get("total", {}).get("records") == total.get("records"),
          "--json runs: each run carries its total")

    # SLO gates: exit 0 when every term holds, 1 when one does not (each term
    # with its measured value), 2 for a malformed expression; JUnit for CI.
    junit = os.path.join(tmp, "slo.xml")
    rc, out, err = ctl("check", "out", "--slo", "p99<=1s, invalid=0, records>=300000, "
                       "max<=" + str(total.get("maxLatency")) + ",rate>=1", "--junit", junit)
    check(rc == 0 and out.count("PASS ") == 5 and "every term holds" in out,
          f"check: every term holds, exit 0 ({rc}; {out.strip()[-200:]} {err.strip()[-120:]})")
    rc, out, _ = ctl("check", "out", "--slo", "p50<=1ns,records>=300001,invalid=0", "--junit",
                     junit)
    check(rc == 1 and re.search(r"FAIL p50<=1ns: \d+ ns \(", out) and
          "FAIL records>=300001: 300000" in out and "PASS invalid=0: 0" in out,
          f"check: failing terms exit 1, each with its measured value ({out.strip()[-240:]})")
    import xml.etree.ElementTree as ET
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase") if suite is not None else []
    check(suite is not None and suite.get("tests") == "3" and suite.get("failures") == "2" and
          [c.get("name") for c in cases] == ["p50<=1ns", "records>=300001", "invalid=0"] and
          [c.find("failure") is not None for c in cases] == [True, True, False],
          "check --junit: one testcase per term, a failure for each that did not hold")
    rc, _, err = ctl("check", "out", "--slo", "p99<=2hours")
    check(rc == 2 and "unknown unit 'hours'" in err, f"check: a malformed term exits 2 ({rc})")
    rc, out, _ = ctl("--json", "check", "out", "--slo", "p99<=1s")
    verdict = json.loads(out) if out.strip() else {}
    check(rc == 0 and verdict.get("passed") is True and
          verdict.get("terms", [{}])[0].get("term") == "p99<=1s",
          "--json check: passed and each term")

    # compare: both totals side by side; runs of different units in the finer
    # one (zero is an ms run: its latencies scale to ns exactly); --fail-if
    # is a regression gate.
    rc, out, err = ctl("compare", "zero", "out", "--p", "50,99")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[3:] if line.strip()}
    check(rc == 0 and rows.get("records", [""])[:2] == ["100000", "300000"] and
          rows.get("max", [""])[2:4] == [str(total.get("maxLatency")), "ns"] and
          "+200.0%" in rows.get("records", []),
          f"compare zero out: records, B-A and % side by side, ms scaled to ns "
          f"({rows.get('records')}, {rows.get('max')}; {err.strip()[-160:]})")
    rc, out, _ = ctl("compare", "zero", "out", "--fail-if", "records>+100%,p99>+1s")
    check(rc == 1 and "FAIL records>+100%: 100000 -> 300000 (+200.0%)" in out and
          "PASS p99>+1s" in out and "regression: B fails the gate" in out,
          f"compare --fail-if: a failed term exits 1 and is named ({out.strip()[-200:]})")
    rc, out, _ = ctl("--json", "compare", "out", "out", "--fail-if", "p99>+0%")
    cmp = json.loads(out) if out.strip() else {}
    check(rc == 0 and cmp.get("passed") is True and
          all(r["delta"] in (0, None) for r in cmp.get("rows", [{"delta": 1}])),
          "--json compare of a run with itself: every delta 0, the gate passes")
    rc, _, err = ctl("compare", "out", "--fail-if", "p99>+5%")
    check(rc == 2 and "two runs" in err, f"compare with one run: usage error ({rc})")

    # export: the exact total distribution as JSON, CSV and HdrHistogram's
    # percentile text; each read back and checked against the daemon's own
    # exact percentiles and counters.
    rc, out, err = ctl("export", "out")
    exported = json.loads(out) if rc == 0 else {}
    pairs = [tuple(p) for p in exported.get("latencies", [])]
    rc_p, ladder, _ = ctl("--json", "percentiles", "out", "--p", "50,99,99.9,99.99")
    want = json.loads(ladder)["percentiles"] if rc_p == 0 else {}
    check(rc == 0 and sum(c for _, c in pairs) == total.get("validLatencyRecords") and
          pairs == sorted(pairs) and exported.get("maxLatency") == total.get("maxLatency") and
          exact_percentiles(pairs, [50, 99, 99.9, 99.99]) ==
          [want.get(k) for k in ("50", "99", "99.9", "99.99")],
          f"export --format json: the exact distribution, its percentiles the daemon's "
          f"({len(pairs)} latencies; {err.strip()[-160:]})")
    csv_path = os.path.join(tmp, "out.csv")
    rc, _, _ = ctl("export", "out", "--format", "csv", "--out", csv_path)
    with open(csv_path) as f:
        rows = f.read().splitlines()
    check(rc == 0 and rows[0] == "latency_ns,count" and
          [tuple(map(int, r.split(","))) for r in rows[1:]] == pairs,
          "export --format csv --out: the same pairs under latency_ns,count")
    rc, out, _ = ctl("export", "out", "--format", "hgrm")
    lines = out.splitlines()
    body = [line.split() for line in lines[2:] if line.strip() and not line.startswith("#")]
    cumulative, ok = 0, rc == 0 and lines[0].split() == ["Value", "Percentile", "TotalCount",
                                                         "1/(1-Percentile)"]
    for (latency, count), row in zip(pairs, body):
        cumulative += count
        ok = ok and float(row[0]) == latency and int(row[2]) == cumulative and \
            abs(float(row[1]) - cumulative / total.get("validLatencyRecords")) < 1e-12
    footer = [line for line in lines if line.startswith("#[Max")]
    check(ok and len(body) == len(pairs) and len(body[-1]) == 3 and footer and
          f"Total count    = {total.get('validLatencyRecords'):>12}" in footer[0],
          f"export --format hgrm: one row per latency, exact cumulative counts ({lines[:3]})")
    # --method: HdrHistogram Java's and C's ranks, exact, median included, on
    # the total and on a range of all its windows; bad names are usage errors.
    levels = [0, 1, 12.5, 25, 50, 90, 99, 99.9, 100]
    for method in ("sbk", "nearest-rank", "hdr"):
        want = exact_percentiles(pairs, levels + [50], method)
        got = []
        for asked in ([], ["--windows", "1-1000000"]):
            rc, out, err = ctl("--json", "percentiles", "out", "--p", ",".join(map(str, levels)),
                               "--method", method, *asked)
            answer = json.loads(out) if rc == 0 else {}
            got.append([answer.get("percentiles", {}).get(f"{p:g}") for p in levels] +
                       [answer.get("medianLatency")])
            got.append(answer.get("method"))
        check(got == [want, method, want, method],
              f"percentiles --method {method}: the exact ranks on the total and on a range "
              f"of every window, median too ({got[0]} want {want}; {err.strip()[-160:]})")
    # Where the rules differ: ten records 1..10 ns (a fio latency log), p12,
    # p30, p50 and the median by each (latency_percentiles.h's example).
    fio_log = os.path.join(tmp, "ten_lat.1.log")
    with open(fio_log, "w") as f:
        f.writelines(f"{i}, {i}, 1, 4096, {i * 4096}\n" for i in range(1, 11))
    rc, _, err = ctl("import", "--format", "fio", fio_log, "--run", "ten")
    check(rc == 0, f"import of ten fio records as run ten-write ({err.strip()[-160:]})")
    seen = {}
    for method in ("sbk", "nearest-rank", "hdr"):
        rc, out, err = ctl("--json", "percentiles", "ten-write", "--p", "12,30,50", "--method",
                           method)
        answer = json.loads(out) if rc == 0 else {}
        seen[method] = [answer.get("percentiles", {}).get(k) for k in ("12", "30", "50")] + \
            [answer.get("medianLatency")]
    check(seen == {"sbk": [2, 4, 6, 6], "nearest-rank": [2, 3, 5, 5], "hdr": [1, 3, 5, 5]},
          f"records 1..10: p12, p30, p50, median differ by method as documented ({seen})")
    rc, _, err = ctl("percentiles", "out", "--method", "nearest")
    check(rc == 2 and "sbk, nearest-rank or hdr" in err,
          f"--method nearest: usage error naming the methods ({rc}, {err.strip()})")
    rc, _, err = ctl("export", "out", "--format", "csv", "--method", "hdr")
    check(rc == 2 and "--format hgrm" in err,
          f"export --format csv --method: usage error ({rc}, {err.strip()})")

    ctl("bench", "-writers", "1", "-seconds", "30", "-time", "ns", "--name", "long")
    rc, _, err = ctl("export", "long")
    check(rc == 1 and "FAILED_PRECONDITION" in err and "is running" in err,
          f"export of a running run: refused until it ends ({err.strip()[-120:]})")
    ctl("stop", "long")

    # SBK habits: -interval in fractions of a second; SBK options perld does
    # not take get perld's way (exit 2), in perld bench and perlctl alike.
    rc, out, err = ctl("--json", "bench", "-writers", "1", "-seconds", "1.2", "-time", "ns",
                       "-interval", "0.25", "--name", "quarter", "--wait")
    periodic = [o for o in map(json.loads, out.splitlines()) if o.get("kind") == "periodic"]
    lengths = sorted(w["seconds"] for w in periodic[:-1])  # the last one is partial
    check(rc == 0 and len(periodic) >= 3 and abs(lengths[len(lengths) // 2] - 0.25) < 0.1,
          f"bench -interval 0.25: quarter-second windows ({[w['seconds'] for w in periodic]}; "
          f"{err.strip()[-200:]})")
    # Long exact runs show their progress after each interval window.
    rc, out, err = ctl("bench", "-writers", "1", "-records", "3000000", "-time", "ns",
                       "-interval", "0.05", "--wait", "--p", "50")
    progress = re.findall(r"progress: (\d+) of 3000000 records \((\d+)%\), ETA ", out)
    check(rc == 0 and progress and all(int(a) <= int(b) for (a, _), (b, _) in
                                        zip(progress, progress[1:])),
          f"bench --wait: 'progress: N of 3000000 records (P%), ETA' after each window "
          f"({progress[:3]}; {err.strip()[-160:]})")
    rc, out, _ = ctl("bench", "-writers", "1", "-seconds", "1", "-time", "ns", "-interval",
                     "0.25", "--wait", "--p", "50")
    check(rc == 0 and re.search(r"progress: [\d.]+ of 1 s \(\d+%\), ETA [\d.]+ s", out),
          "bench --wait -seconds 1: progress in seconds")
    for cmd in ([args.perld, "bench"], [args.perlctl, "--target", d.grpc, "bench"]):
        p = subprocess.run(cmd + ["-writers", "1", "-seconds", "1", "-ram", "host"],
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and "'-ram' is an SBK option perld does not take" in p.stderr and
              "aggregator" in p.stderr,
              f"{os.path.basename(cmd[0])} bench -ram: exit 2 with perld's way "
              f"({p.returncode}: {p.stderr.strip()[:160]})")
    check(d.stop() == 0, "SIGTERM: exit 0")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
