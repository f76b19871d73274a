#!/usr/bin/env python3
"""Exact percentiles over a range of windows (issue 28; README "Ranges").

One ingest run (200 ms windows) held open by a client that sends nothing;
three `perlctl load` phases of 0.7 s (10,000, 20,000 and 30,000 records/s)
join it one after another, 0.8 s apart, each writing its own exact distribution (--distribution-out: the client's own
truth). The run's windows with records form three groups, one per phase.
Then, against an oracle that merges the clients' distributions in Python
(not perld's merge) and applies the index rule:

  * `percentiles --windows A-B` over each phase's windows equals that
    phase's distribution: records, min, max and every percentile;
  * `--from T` (RFC 3339, the second phase's first window start) and
    `--warmup D` (the same instant as an offset) equal phases 2 and 3;
  * `--windows 1-` equals the run's total and all three phases;
  * `check --windows` measures the range (records, p99 exactly), `compare
    --windows` compares ranges, `export --windows` writes the range's exact
    distribution pair for pair;
  * after a restart, any percentile of the latest window (its distribution
    read back from the state database);
  * a bench run with -warmup 1: its windows of the first second are
    flagged warmup, its total holds exactly the others (records; every
    percentile equals the range over them);
  * a range with no window is OUT_OF_RANGE (exit 1), a malformed one a
    usage error (exit 2), a range past the run's
    retention.maxWindowDistributionBytesPerRun FAILED_PRECONDITION, and
    `show` (and the log) say which windows have no stored distribution.

  /usr/bin/python3 tests/integration/window_ranges_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import (Daemon, IngestStream, check, exact_percentiles, finish,  # noqa: E402
                      ingest_stubs, merged_distributions)

PERCENTS = [0, 1, 10, 50, 90, 99, 99.9, 99.99, 100]


def rfc3339(unix_ms):
    return datetime.datetime.fromtimestamp(unix_ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    import grpc
    tmp = tempfile.mkdtemp(prefix="perld-window-ranges-")
    ipb, irpc = ingest_stubs(tmp)
    d = Daemon(args.perld, os.path.join(tmp, "state"), log=os.path.join(tmp, "perld.log"))
    try:
        ctl = [args.perlctl, "--target", d.grpc]

        def percentiles(*extra):
            p = subprocess.run(ctl + ["--json", "percentiles", "phases", "--p",
                                      ",".join(str(x) for x in PERCENTS)] + list(extra),
                               capture_output=True, text=True, timeout=60)
            return p.returncode, (json.loads(p.stdout) if p.returncode == 0 else p.stderr)

        holder = IngestStream(irpc.IngestStub(grpc.insecure_channel(d.grpc)), ipb,
                              ipb.IngestOpen(run_name="phases", client_id="holder",
                                             client_name="holder", time_unit=3,
                                             reporting_interval_ms=200,
                                             mode=ipb.IngestOpen.MODE_RAW))
        opened = holder.recv().opened
        check(opened.run_id > 0, f"the holder opened run {opened.run_id}")
        files = []
        for k in range(3):
            out = os.path.join(tmp, f"phase{k}.json")
            files.append(out)
            p = subprocess.run(ctl + ["load", "--run", "phases", "--join", "--name", f"phase{k}",
                                      "-writers", "1", "-time", "ns", "-seconds", "0.7",
                                      "-size", "100", "-throughput", str(k + 1),
                                      "--distribution-out", out],
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 0, f"phase {k} loaded ({p.stderr.strip()[-200:]})")
            time.sleep(0.8)
        holder.finish(0)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            h = json.loads(subprocess.run(ctl + ["--json", "history", "phases"],
                                          capture_output=True, text=True, timeout=30).stdout)
            if any(w["kind"] == "total" and w.get("final") for w in h["windows"]):
                break
            time.sleep(0.2)
        periodic = [w for w in h["windows"] if w["kind"] == "periodic"]
        # Phases are 0.8 s (4 windows) apart: a group ends at 2 empty windows
        # or more (a stall inside a phase under load may leave one).
        groups = []
        for w in periodic:
            if w["records"] == 0:
                continue
            if groups and w["seq"] - groups[-1][-1]["seq"] <= 2:
                groups[-1].append(w)
            else:
                groups.append([w])
        check(len(groups) == 3, f"three groups of windows, one per phase "
              f"({[[w['seq'] for w in g] for g in groups]})")
        if len(groups) != 3:
            return finish()

        def expect(answer, phase_files, what):
            pairs, records = merged_distributions(phase_files)
            want = exact_percentiles(pairs, PERCENTS)
            got = [answer["percentiles"][str(p) if p != int(p) else str(int(p))]
                   for p in PERCENTS]
            r = answer["range"]
            check(r["records"] == records and r["minLatency"] == pairs[0][0] and
                  r["maxLatency"] == pairs[-1][0] and got == want,
                  f"{what}: {r['records']} records, min {r['minLatency']}, max "
                  f"{r['maxLatency']}, percentiles {got} == the clients' {records}, "
                  f"{pairs[0][0]}, {pairs[-1][0]}, {want}")

        for k, g in enumerate(groups):
            rc, a = percentiles("--windows", f"{g[0]['seq']}-{g[-1]['seq']}")
            check(rc == 0, f"--windows {g[0]['seq']}-{g[-1]['seq']} answers ({a})")
            if rc == 0:
                expect(a, [files[k]], f"phase {k + 1} (windows {g[0]['seq']}-{g[-1]['seq']})")
        second = groups[1][0]["startUnixMs"]
        rc, a = percentiles("--from", rfc3339(second))
        if rc == 0:
            expect(a, files[1:], f"--from {rfc3339(second)}")
        else:
            check(False, f"--from answers ({a})")
        run = json.loads(subprocess.run(ctl + ["--json", "show", "phases"], capture_output=True,
                                        text=True, timeout=30).stdout)
        offset = second - run["startUnixMs"]
        rc, a = percentiles("--warmup", f"{offset}ms")
        if rc == 0:
            expect(a, files[1:], f"--warmup {offset}ms")
        else:
            check(False, f"--warmup answers ({a})")
        rc, a = percentiles("--windows", "1-")
        if rc == 0:
            expect(a, files, "--windows 1- (the whole run)")
            total = run["total"]
            shared = [k for k in a["percentiles"] if k in total["percentiles"]]
            check(a["range"]["records"] == total["records"] and len(shared) >= 3 and
                  [a["percentiles"][k] for k in shared] ==
                  [total["percentiles"][k] for k in shared],
                  f"--windows 1- equals the run's total (p{', p'.join(shared)})")
        # check and compare over a range: the same exact figures.
        g = groups[1]
        pairs, records = merged_distributions([files[1]])
        p99 = exact_percentiles(pairs, [99])[0]
        span = f"{g[0]['seq']}-{g[-1]['seq']}"
        p = subprocess.run(ctl + ["--json", "check", "phases", "--slo",
                                  f"records>={records},p99<={p99}", "--windows", span],
                           capture_output=True, text=True, timeout=30)
        measured = [t["measured"] for t in json.loads(p.stdout)["terms"]] if p.stdout else []
        check(p.returncode == 0 and measured == [records, p99],
              f"check --windows {span}: records and p99 are phase 2's ({measured})")
        p = subprocess.run(ctl + ["check", "phases", "--slo", f"records>={records + 1}",
                                  "--windows", span], capture_output=True, text=True, timeout=30)
        check(p.returncode == 1, f"check --windows {span}: records>={records + 1} fails")
        p = subprocess.run(ctl + ["--json", "compare", "phases", "phases", "--p", "99",
                                  "--windows", span], capture_output=True, text=True, timeout=30)
        rows = {r["metric"]: r for r in json.loads(p.stdout)["rows"]} if p.returncode == 0 else {}
        check(rows.get("p99", {}).get("a") == p99 and rows.get("records", {}).get("b") == records,
              f"compare --windows {span}: p99 and records are phase 2's ({list(rows.items())[:3]})")
        out = os.path.join(tmp, "phase2-export.json")
        p = subprocess.run(ctl + ["export", "phases", "--windows", span, "--out", out,
                                  "--format", "json"], capture_output=True, text=True, timeout=30)
        exported = json.load(open(out)) if p.returncode == 0 else {}
        check([tuple(x) for x in exported.get("latencies", [])] == pairs and
              exported.get("firstWindow") == g[0]["seq"] and
              exported.get("lastWindow") == g[-1]["seq"] and exported.get("records") == records,
              f"export --windows {span}: phase 2's exact distribution, pair for pair "
              f"({len(exported.get('latencies', []))} pairs; {p.stderr.strip()[-200:]})")
        rc, err = percentiles("--windows", f"{periodic[-1]['seq'] + 5}-")
        check(rc == 1 and "OUT_OF_RANGE" in err, f"no window in the range: OUT_OF_RANGE ({err})")
        rc, err = percentiles("--windows", "3-1")
        check(rc == 2, f"--windows 3-1 is a usage error ({rc})")
        rc, err = percentiles("--warmup", "5s", "--from", "1s")
        check(rc == 2, f"--warmup with --from is a usage error ({rc})")
    finally:
        d.stop()

    # After a restart the latest window's distribution comes from the state
    # database: any percentile of it, exactly.
    d = Daemon(args.perld, os.path.join(tmp, "state"), log=os.path.join(tmp, "perld.log"))
    try:
        p = subprocess.run([args.perlctl, "--target", d.grpc, "--json", "percentiles", "phases",
                            "--scope", "latest", "--p", "0,100"], capture_output=True, text=True,
                           timeout=30)
        latest = periodic[-1]
        want = {"0": latest["minLatency"], "100": latest["maxLatency"]} if latest["records"] \
            else {"0": 0, "100": 0}
        got = json.loads(p.stdout)["percentiles"] if p.returncode == 0 else p.stderr
        check(got == want, f"after a restart, p0/p100 of the latest window: {got} == {want}")
    finally:
        d.stop()

    # A bench run with -warmup: its total is exactly its windows after the
    # warm-up (the range over them), the warm-up's windows are flagged.
    d = Daemon(args.perld, os.path.join(tmp, "state3"), log=os.path.join(tmp, "perld3.log"))
    try:
        ctl = [args.perlctl, "--target", d.grpc, "--json"]
        p = subprocess.run(ctl + ["bench", "-writers", "1", "-seconds", "2", "-warmup", "1",
                                  "-interval", "0.25", "-time", "ns", "--name", "warm", "--wait"],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, f"bench -warmup 1 ran ({p.stderr.strip()[-200:]})")
        h = json.loads(subprocess.run(ctl + ["history", "warm"], capture_output=True, text=True,
                                      timeout=30).stdout)
        periodic = [w for w in h["windows"] if w["kind"] == "periodic"]
        total = [w for w in h["windows"] if w["kind"] == "total"][-1]
        warm = [w for w in periodic if w["warmup"]]
        steady = [w for w in periodic if not w["warmup"]]
        check(len(warm) >= 2 and len(steady) >= 2 and
              all(a["seq"] < b["seq"] for a in warm for b in steady) and
              abs(steady[0]["startUnixMs"] - (h["windows"][0]["startUnixMs"] + 1000)) < 300,
              f"the warm-up's windows come first, flagged, and end ~1 s in "
              f"({[(w['seq'], w['warmup']) for w in periodic]})")
        check(total["records"] == sum(w["records"] for w in steady) and
              total["warmupRecords"] == sum(w["records"] for w in warm) > 0 and
              0.9 < total["seconds"] < 1.3,
              f"the total holds the steady windows only: {total['records']} records == "
              f"{sum(w['records'] for w in steady)}, over {total['seconds']:.2f} s; the warm-up's "
              f"{total['warmupRecords']} are accounted for")
        p = subprocess.run(ctl + ["percentiles", "warm", "--windows", f"{steady[0]['seq']}-",
                                  "--p", "50,99,99.9,100"], capture_output=True, text=True,
                           timeout=30)
        ranged = json.loads(p.stdout)["percentiles"] if p.returncode == 0 else p.stderr
        p = subprocess.run(ctl + ["percentiles", "warm", "--p", "50,99,99.9,100"],
                           capture_output=True, text=True, timeout=30)
        whole = json.loads(p.stdout)["percentiles"] if p.returncode == 0 else p.stderr
        check(ranged == whole, f"the total's percentiles are the steady windows' ({whole})")
        p = subprocess.run([args.perlctl, "--target", d.grpc, "bench", "-writers", "1",
                            "-records", "10", "-warmup", "1"], capture_output=True, text=True,
                           timeout=30)
        check(p.returncode == 2 and "-seconds" in p.stderr,
              f"-warmup without -seconds is a usage error ({p.returncode}: {p.stderr[:120]})")
    finally:
        d.stop()

    # A run past its window distribution budget: refused, never partial.
    config = os.path.join(tmp, "small.yaml")
    with open(config, "w") as f:
        f.write("retention:\n  maxWindowDistributionBytesPerRun: 64\n")
    d = Daemon(args.perld, os.path.join(tmp, "state2"), config=config,
               log=os.path.join(tmp, "perld2.log"))
    try:
        ctl = [args.perlctl, "--target", d.grpc]
        subprocess.run(ctl + ["bench", "-writers", "1", "-seconds", "1", "-interval", "0.25",
                              "-time", "ns", "--name", "small", "--wait"],
                       capture_output=True, text=True, timeout=60)
        p = subprocess.run(ctl + ["percentiles", "small", "--windows", "1-"],
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 1 and "FAILED_PRECONDITION" in p.stderr and
              "retention.maxWindowDistributionBytesPerRun" in p.stderr,
              f"over the budget: FAILED_PRECONDITION naming the key ({p.stderr.strip()[-300:]})")
        # The run says so too: show counts the windows a range cannot cover.
        shown = json.loads(subprocess.run(ctl + ["--json", "show", "small"], capture_output=True,
                                          text=True, timeout=30).stdout)
        text = subprocess.run(ctl + ["show", "small"], capture_output=True, text=True,
                              timeout=30).stdout
        check(shown["windowsWithoutDistribution"] >= 1 and
              shown["firstWindowWithoutDistribution"] >= 1 and
              "have no stored distribution" in text,
              f"show says which windows have no distribution "
              f"({shown['windowsWithoutDistribution']} from {shown['firstWindowWithoutDistribution']})")
    finally:
        d.stop()
    with open(os.path.join(tmp, "perld2.log")) as f:
        check("maxWindowDistributionBytesPerRun" in f.read(),
              "the daemon's log says when a run's windows outgrow the budget")
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
