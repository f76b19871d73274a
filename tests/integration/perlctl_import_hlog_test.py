#!/usr/bin/env python3
"""`perlctl import --format hlog` (issue 29; README "Import"): HdrHistogram
interval logs streamed into a run through the ordinary Ingest path, checked
against the REAL HistogramLogProcessor of Debian's libhdrhistogram-java
(/usr/share/java/hdrhistogram.jar on openjdk-17-jre-headless; the test fails,
never skips, without them).

Each count is imported at its bucket's highest equivalent value -- what
HdrHistogram reports -- so perld's exact nearest-rank percentiles of the
imported run (`percentiles --method nearest-rank`) are the processor's .hgrm
values, row for row, and the run's total is the processor's total count.
Logs checked:
  * perld's own export (`export --format hlog`) of a bench run at -time ns
    (values above 2^18 bucketed), imported back as a new run (windows mode);
  * tests/unit/hlog/java_2.1.11_uniform.hlog, written by the real Java
    HistogramLogWriter (tests/unit/hlog/HlogFixture.java: 3 significant
    digits, ns), in raw mode; and its Tag=warmup interval with --tag warmup
    against the processor's -tag warmup;
  * both logs merged into one run: the counts add (the processor's totals
    summed) and the distribution is the sum of the two imports';
  * tests/unit/hlog/java_2.1.11.hlog (mixed layouts, a count over 2^31 - 1):
    the total equals the processor's (its percentiles are not compared: the
    processor re-buckets every interval into its first one's layout).
Every imported run is bucketed: show --json says exact false with the
reason, GetPercentiles exact false, bucketed true, percentiles given. A
bucketed client joining a raw run makes it bucketed. --run-unit us on a
log whose bucket values are not whole us exits 2 naming FILE:LINE;
a corrupted payload exits 2, "nothing was sent", no run.

  /usr/bin/python3 tests/integration/perlctl_import_hlog_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import decimal
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import Daemon, check, finish  # noqa: E402

import grpc  # noqa: E402

JAR = perld_it.HDR_JAR
PROCESSOR = "org.HdrHistogram.HistogramLogProcessor"
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "unit", "hlog")
UNIFORM = os.path.join(FIXTURES, "java_2.1.11_uniform.hlog")
MIXED = os.path.join(FIXTURES, "java_2.1.11.hlog")


def hdr_level(fraction):
    """The percentile level (in %) a .hgrm row was computed at, exactly.
    HdrHistogram's PercentileIterator steps its level by 100 / (ticks * 2^k)
    percent -- binary fractions of a percent, on a 2^-30 grid at the depths a
    log reaches -- and the .hgrm prints level / 100 rounded to 12 decimals.
    Asking perld for the printed, rounded level would move the nearest rank
    by one whenever level * N / 100 is an integer (N a multiple of 2^k: a
    flake seen with 12,255,232 = 748 * 2^14 records), so the level is snapped
    back to that grid first."""
    return round(float(decimal.Decimal(fraction) * 100) * 2**30) / 2**30


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    java = perld_it.hdrhistogram_java()
    if java is None:
        return finish()
    tmp = tempfile.mkdtemp(prefix="perld-import-hlog-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    d = Daemon(args.perld, os.path.join(tmp, "state"), log=os.path.join(tmp, "perld.log"))
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))

    def ctl(*cmd, timeout=300):
        p = subprocess.run([args.perlctl, "--target", d.grpc] + list(cmd), capture_output=True,
                           text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def processor(hlog, name, *extra):
        out = os.path.join(tmp, name + ".out")
        p = subprocess.run([java, "-cp", JAR, PROCESSOR, "-i", hlog, "-csv",
                            "-outputValueUnitRatio", "1", "-o", out] + list(extra),
                           capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"{name}: HistogramLogProcessor reads {os.path.basename(hlog)} "
                                 f"({p.returncode}, {p.stderr.strip()[:200]})")
        hgrm = perld_it.processor_csv_rows(out + ".hgrm")
        rows = [(int(float(v)), f, int(c)) for v, f, c, _ in hgrm]
        return rows, (rows[-1][2] if rows else 0)

    def wait_final(run):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rc, out, _ = ctl("--json", "show", run)
            if rc == 0:
                shown = json.loads(out)
                if shown["state"] != "running" and shown["total"].get("final"):
                    return shown
            time.sleep(0.1)
        check(False, f"run {run} ended")
        return None

    def distribution(run):
        rc, out, err = ctl("export", run, "--format", "csv")
        check(rc == 0, f"{run}: export --format csv ({err.strip()[:200]})")
        return {int(a): int(b) for a, b in (line.split(",") for line in out.splitlines()[1:])}

    def import_hlog(run, files, *extra, want_rc=0):
        rc, out, err = ctl("--json", "import", "--format", "hlog", *files, "--run", run, *extra)
        check(rc == want_rc, f"{run}: import --format hlog {' '.join(extra)} exits {want_rc} "
                             f"({rc}, {err.strip()[-300:]})")
        return json.loads(out) if rc == 0 else None, err

    def check_bucketed(run, shown, files):
        names = ", ".join(os.path.basename(f) for f in files)
        reason = shown["inexactReason"] if shown else ""
        check(shown is not None and shown["exact"] is False and
              shown["bucketed"] is True and
              reason.startswith(f"imported from HdrHistogram log{'s' if len(files) > 1 else ''} "
                                f"{names}: values are HdrHistogram's highest equivalent values "
                                f"(within 1/2^"),
              f"{run}: show --json: exact false, bucketed, the reason ({reason})")
        view = query.GetRun(pb.GetRunRequest(run=run), timeout=10)
        answer = query.GetPercentiles(pb.GetPercentilesRequest(run=run, percentiles=[50, 99]),
                                      timeout=10)
        check(view.run.bucketed_reason == reason and not answer.exact and answer.bucketed and
              answer.inexact_reason == reason and len(answer.percentiles) == 2,
              f"{run}: GetRun's bucketed_reason; GetPercentiles exact false, bucketed, the "
              f"reason, percentiles given ({answer.exact}, {answer.bucketed}, "
              f"{len(answer.percentiles)})")
        rc, out, _ = ctl("show", run)
        check(rc == 0 and "not exact (bucketed): imported from HdrHistogram" in out,
              f"{run}: perlctl show says it is bucketed and why")

    def check_like_processor(name, run, rows, total):
        """perld's nearest-rank percentiles at the .hgrm levels == its values."""
        shown = wait_final(run)
        valid = shown["total"]["validLatencyRecords"] if shown else -1
        check(valid == total > 0,
              f"{name}: the run's valid records are the processor's total count "
              f"({valid}, {total})")
        levels = sorted({hdr_level(f) for _, f, _ in rows})
        rc, out, err = ctl("--json", "percentiles", run, "--p", ",".join(map(repr, levels)),
                           "--method", "nearest-rank")
        got = json.loads(out) if rc == 0 else {}
        perld = {float(k): v for k, v in (got.get("percentiles") or {}).items()}
        wrong = [f"p{hdr_level(f)}: processor {v}, perld {perld.get(hdr_level(f))}"
                 for v, f, _ in rows
                 if perld.get(hdr_level(f)) != v]
        check(rc == 0 and got.get("exact") is False and got.get("bucketed") is True and
              not wrong and len(rows) > 10,
              f"{name}: every one of the processor's {len(rows)} .hgrm rows is perld's "
              f"nearest-rank percentile of the import ({wrong[:4]}; {err.strip()[:200]})")
        return shown

    # 1. perld's own export of a bench run, imported back (windows mode).
    rc, _, err = ctl("bench", "-writers", "2", "-size", "100", "-interval", "1", "-seconds", "3",
                     "-time", "ns", "--name", "src", "--wait")
    check(rc == 0, f"bench src ({err.strip()[-200:]})")
    exported = os.path.join(tmp, "src.hlog")
    rc, _, err = ctl("export", "src", "--format", "hlog", "--out", exported)
    check(rc == 0, f"export src --format hlog ({err.strip()[:200]})")
    rows, total = processor(exported, "exported")
    summary, err = import_hlog("back", [exported])
    check(summary is not None and summary["runs"][0]["runCreated"] and
          summary["runs"][0]["ackedRecords"] == total and summary["logUnit"] == "ns",
          f"back: every count sent and acknowledged ({summary and summary['runs'][0]})")
    shown = check_like_processor("exported", "back", rows, total)
    check_bucketed("back", shown, [exported])
    src_pairs = distribution("src")
    outside = sum(c for v, c in src_pairs.items() if v >= 1 << 18)
    back = distribution("back")
    check(sum(back.values()) == sum(src_pairs.values()) and
          all(back.get(v) == c for v, c in src_pairs.items() if v < 1 << 18),
          f"back: below 2^18 every value's count is the source run's, exactly "
          f"({outside} records above, bucketed)")

    # 2. A log the real Java HistogramLogWriter wrote, raw mode; its tag.
    rows, total = processor(UNIFORM, "uniform")
    import_hlog("java", [UNIFORM], "--mode", "raw")
    shown = check_like_processor("java-written", "java", rows, total)
    check_bucketed("java", shown, [UNIFORM])
    tag_rows, tag_total = processor(UNIFORM, "uniform-warmup", "-tag", "warmup")
    summary, _ = import_hlog("java-warmup", [UNIFORM], "--tag", "warmup")
    check(summary is not None and summary["intervals"] == 1 and summary["tag"] == "warmup" and
          summary["otherTagIntervals"] == 5,
          f"java-warmup: --tag warmup reads the one tagged interval, skips 5 "
          f"({summary and (summary['intervals'], summary['otherTagIntervals'])})")
    check_like_processor("java-written -tag warmup", "java-warmup", tag_rows, tag_total)

    # 3. Two logs merged: one run, counts add.
    import_hlog("merged", [exported, UNIFORM])
    shown = wait_final("merged")
    merged = distribution("merged")
    java_pairs = distribution("java")
    want = dict(back)
    for v, c in java_pairs.items():
        want[v] = want.get(v, 0) + c
    check(shown is not None and shown["total"]["validLatencyRecords"] ==
          sum(back.values()) + sum(java_pairs.values()) and merged == want,
          f"merged: two logs, one run: the counts of both imports added "
          f"({len(merged)} values)")
    check_bucketed("merged", shown, [exported, UNIFORM])

    # 4. The mixed-layout Java log: totals (a count over 2^31 - 1 included).
    _, total = processor(MIXED, "mixed")
    import_hlog("mixed", [MIXED], "--max-latency", "3600000000000")
    shown = wait_final("mixed")
    check(shown is not None and shown["total"]["validLatencyRecords"] == total > 3_000_000_000,
          f"mixed: the run's valid records are the processor's total "
          f"({shown and shown['total']['validLatencyRecords']}, {total})")

    # 5. A bucketed client joining a raw run makes the run bucketed.
    load = subprocess.Popen([args.perlctl, "--target", d.grpc, "load", "--run", "joined",
                             "-writers", "1", "-size", "100", "-seconds", "4", "-time", "ns",
                             "-throughput", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if ctl("show", "joined")[0] == 0:
            break
        time.sleep(0.1)
    before = query.GetRun(pb.GetRunRequest(run="joined"), timeout=10).run.bucketed_reason
    import_hlog("joined", [UNIFORM], "--join")
    after = query.GetRun(pb.GetRunRequest(run="joined"), timeout=10).run.bucketed_reason
    load.communicate(timeout=60)
    shown = wait_final("joined")
    check(before == "" and after.startswith("imported from HdrHistogram log") and
          shown is not None and shown["exact"] is False,
          f"joined: a raw run, bucketed once an hlog import joined it ({before!r}, {after!r})")

    # 6. Refusals: nothing sent, no run.
    rc, _, err = ctl("import", "--format", "hlog", exported, "--run", "in-us", "--run-unit", "us")
    check(rc == 2 and f"{exported}:" in err and "is not a whole number of us" in err and
          "nothing was sent" in err,
          f"--run-unit us of ns bucket values: exit 2 naming FILE:LINE ({err.strip()[:300]})")
    bad = os.path.join(tmp, "bad.hlog")
    with open(UNIFORM) as f:
        lines = f.read().splitlines()
    lines[-1] = lines[-1][:-12] + "AAAAAAAAAAAA"
    with open(bad, "w") as f:
        f.write("\n".join(lines) + "\n")
    rc, _, err = ctl("import", "--format", "hlog", UNIFORM, bad, "--run", "bad")
    check(rc == 2 and f"{bad}:{len(lines)}: the histogram" in err and "nothing was sent" in err,
          f"a corrupted payload in the second file: exit 2, FILE:LINE ({err.strip()[:300]})")
    rc, _, err = ctl("import", "--format", "hlog", UNIFORM, "--run", "none", "--tag", "nope")
    check(rc == 2 and "intervals seen: Tag=warmup, untagged" in err.replace("untagged, Tag=warmup",
                                                                             "Tag=warmup, untagged"),
          f"--tag with no interval: exit 2 naming the tags seen ({err.strip()[:300]})")
    names = [r.name for r in query.ListRuns(pb.ListRunsRequest(), timeout=10).runs]
    check(not {"in-us", "bad", "none"} & set(names), f"no run opened by a refusal ({names})")
    rc, _, err = ctl("import", "--format", "fio", UNIFORM, "--run", "x", "--tag", "a")
    check(rc == 2 and "--tag is for --format hlog" in err, f"--tag without hlog: usage ({rc})")
    check(d.stop() == 0, "SIGTERM, exit 0")
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
