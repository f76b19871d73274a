#!/usr/bin/env python3
"""`perlctl load` fails fast and says what it joined (issue 26, README
"Remote benchmark nodes"); `perlctl load --help` is load's own help; `--p`
takes p99; an unnamed bench is named bench-<id>.

  A. No daemon, no --spool: exit 1 within --connect-timeout (plus slack),
     no load generated, the reason and the way out (--spool) on stderr.
  B. SIGINT while it waits for the open: exit 1 within 2 s.
  C. A daemon: the first client prints "created run N", a second client of
     the same unit "joined run N" (the same N); a client asking for another
     unit is refused within seconds (exit 1, "refused run"), -seconds 3600
     notwithstanding; --new on a running name is ALREADY_EXISTS, --join on
     a name no ingest run has is NOT_FOUND (exit 1 both), --join --new is
     a usage error (exit 2), --new on a free name creates the run; the run
     shows its clients' clocks (`clients`, `show`).
  D. No daemon, --spool: recording goes on into the spool past the
     in-flight bound (more than 256 messages), the command ends after
     -seconds and --timeout saying the records are kept in the spool; a
     later `perlctl load --spool` on the same directory sends them first: the
     daemon's run holds both loads' records exactly.
  E. SIGINT while perld is away (no daemon with --spool; a frozen daemon
     without): exit 1 within 2 s, stderr's record and message counts are
     the summary's, and it says where the unacknowledged records are.

  /usr/bin/python3 tests/integration/load_first_hour_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import Daemon, check, finish, free_port, wait_ended  # noqa: E402


def load(perlctl, target, *extra, timeout=60, json_out=False, global_args=(), unit="ns"):
    cmd = [perlctl, "--target", target] + (["--json"] if json_out else []) + list(global_args) + [
        "load", "-writers", "1", "-time", unit] + list(extra)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-load-first-hour-")
    nowhere = f"127.0.0.1:{free_port()}"

    # --- load's own help ----------------------------------------------------------
    p = subprocess.run([args.perlctl, "load", "--help"], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0 and p.stdout.startswith("usage: perlctl") and
          "--connect-timeout" in p.stdout and "--join" in p.stdout and
          "every perld bench option" in p.stdout,
          f"load --help prints load's own help first ({p.stdout[:80]!r})")

    # --- A: no daemon, no spool ------------------------------------------------
    p, took = load(args.perlctl, nowhere, "-seconds", "3600", "--connect-timeout", "1")
    check(p.returncode == 1, f"A: exit 1 without a daemon (exit {p.returncode})")
    check(took < 6, f"A: it ended within seconds, not after -seconds 3600 ({took:.1f} s)")
    check("did not open run 'perlctl-load' within 1 s" in p.stderr and
          "no load was generated" in p.stderr and "--spool" in p.stderr,
          f"A: stderr says why and how to record anyway: {p.stderr.strip()[-300:]}")
    check(p.stdout == "", f"A: no summary of a load that never ran: {p.stdout[:200]}")

    # --- B: SIGINT while waiting for the open -----------------------------------
    proc = subprocess.Popen([args.perlctl, "--target", nowhere, "load", "-writers", "1",
                             "-seconds", "3600", "--connect-timeout", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    took = time.monotonic() - t0
    check(proc.returncode == 1 and took < 2,
          f"B: SIGINT ends it within 2 s, exit 1 ({proc.returncode}, {took:.2f} s)")
    check("interrupted by signal 2 before perld opened the run" in err,
          f"B: stderr says so: {err.strip()[-200:]}")

    # --- C: created, joined, refused ----------------------------------------------
    listen = f"127.0.0.1:{free_port()}"
    d = Daemon(args.perld, os.path.join(tmp, "state"), log=os.path.join(tmp, "perld.log"),
               grpc_listen=listen)
    try:
        # Runs while the others try run 'u': the joining client's close is
        # acknowledged at the run's next interval window (5 s by default).
        first = subprocess.Popen([args.perlctl, "--target", listen, "--json", "load", "-writers", "1",
                                  "-time", "ns", "-seconds", "10", "-size", "100", "-throughput", "1",
                                  "--run", "u"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        joined, _ = load(args.perlctl, listen, "--run", "u", "-records", "1000", json_out=True)
        refused, took = load(args.perlctl, listen, "--run", "u", "-seconds", "3600", unit="ms")
        not_new, _ = load(args.perlctl, listen, "--run", "u", "--new", "-seconds", "3600")
        no_such, _ = load(args.perlctl, listen, "--run", "nosuch", "--join", "-seconds", "3600")
        both, _ = load(args.perlctl, listen, "--run", "u", "--join", "--new", "-records", "1")
        made_new, _ = load(args.perlctl, listen, "--run", "fresh", "--new", "-records", "100",
                           json_out=True)
        out, err = first.communicate(timeout=60)
        check(first.returncode == 0, f"C: the first client exits 0 ({err.strip()[-200:]})")
        run_id = json.loads(out)["runId"] if first.returncode == 0 else -1
        check(f"created run {run_id} 'u'" in err, f"C: the first client created run {run_id}: {err}")
        check(joined.returncode == 0 and f"joined run {run_id} 'u'" in joined.stderr,
              f"C: the second client joined run {run_id}: {joined.stderr.strip()[-200:]}")
        check(joined.returncode == 0 and json.loads(joined.stdout)["runCreated"] is False,
              "C: --json says runCreated false for the joining client")
        check(refused.returncode == 1 and took < 10,
              f"C: a client of another unit is refused within seconds ({refused.returncode}, "
              f"{took:.1f} s)")
        check("refused run 'u'" in refused.stderr and refused.stdout == "",
              f"C: stderr says the run refused it: {refused.stderr.strip()[-300:]}")
        check(not_new.returncode == 1 and "ALREADY_EXISTS" in not_new.stderr and
              f"(id {run_id}) is running" in not_new.stderr,
              f"C: --new while run 'u' runs: exit 1, ALREADY_EXISTS ({not_new.stderr.strip()[-200:]})")
        check(no_such.returncode == 1 and "NOT_FOUND" in no_such.stderr and
              "no running ingest run named 'nosuch'" in no_such.stderr,
              f"C: --join without such a run: exit 1, NOT_FOUND ({no_such.stderr.strip()[-200:]})")
        check(both.returncode == 2, f"C: --join with --new is a usage error ({both.returncode})")
        check(made_new.returncode == 0 and json.loads(made_new.stdout)["runCreated"] is True and
              "created run" in made_new.stderr,
              f"C: --new with a free name creates the run ({made_new.stderr.strip()[-200:]})")

        # An ingest run shows its clients' clocks: each client's in `clients`,
        # every distinct one with its client count in `show`.
        clients = subprocess.run([args.perlctl, "--target", listen, "--json", "clients", "u"],
                                 capture_output=True, text=True, timeout=30)
        clocks = [c["clock"] for c in json.loads(clients.stdout)["clients"]] \
            if clients.returncode == 0 else []
        check(len(clocks) == 2 and all("resolution" in c and c.count("resolution") == 1
                                       for c in clocks),
              f"C: perlctl clients shows each client's clock and resolution ({clocks})")
        shown = subprocess.run([args.perlctl, "--target", listen, "--json", "show", "u"],
                               capture_output=True, text=True, timeout=30)
        clock_line = json.loads(shown.stdout)["clock"] if shown.returncode == 0 else ""
        check(shown.returncode == 0 and "the clients' own: " in clock_line and
              (f"{clocks[0]} (2 clients)" in clock_line if len(set(clocks)) == 1 else
               all(c in clock_line for c in clocks)),
              f"C: perlctl show lists the clients' clocks ({clock_line.strip()})")

        # --p accepts SBK-style p99; an unnamed bench is bench-<id>.
        ctl = [args.perlctl, "--target", listen, "--json"]
        plain = subprocess.run(ctl + ["percentiles", str(run_id), "--p", "50,99.9"],
                               capture_output=True, text=True, timeout=30)
        prefixed = subprocess.run(ctl + ["percentiles", str(run_id), "--p", "p50, P99.9"],
                                  capture_output=True, text=True, timeout=30)
        check(plain.returncode == 0 and prefixed.stdout == plain.stdout,
              f"--p p50,P99.9 is --p 50,99.9 ({prefixed.stderr.strip()[-200:]})")
        bench = subprocess.run(ctl + ["bench", "-writers", "1", "-records", "1000", "-time", "ns",
                                      "--wait"], capture_output=True, text=True, timeout=60)
        listed = subprocess.run(ctl + ["runs"], capture_output=True, text=True, timeout=30)
        benches = [r for r in json.loads(listed.stdout)["runs"] if r["source"] == "bench"]
        check(bench.returncode == 0 and len(benches) == 1 and
              benches[0]["name"] == f"bench-{benches[0]['id']}",
              f"an unnamed bench is named bench-<id> ({[(r['id'], r['name']) for r in benches]})")

        # --- D: no daemon, a spool: recorded now, sent later ----------------------------
        spool = os.path.join(tmp, "spool")
        away = f"127.0.0.1:{free_port()}"
        p, took = load(args.perlctl, away, "--run", "later", "-seconds", "2", "--spool", spool,
                       json_out=True, global_args=("--timeout", "2"))
        check(p.returncode == 1 and took < 15,
              f"D: without a daemon it ends after -seconds and --timeout ({p.returncode}, "
              f"{took:.1f} s)")
        recorded = json.loads(p.stdout) if p.stdout.strip() else {}
        check(recorded.get("messages", 0) > 256,
              f"D: recording went on past the 256 in-flight messages ({recorded.get('messages')})")
        check("recording into the spool" in p.stderr and "kept in the spool" in p.stderr,
              f"D: stderr says it spools and keeps them: {p.stderr.strip()[-300:]}")
        p, _ = load(args.perlctl, listen, "--run", "later", "-records", "10", "--spool", spool,
                    json_out=True)
        check(p.returncode == 0, f"D: the spool is sent once perld is there ({p.stderr[-200:]})")
        if p.returncode == 0 and recorded:
            sent = json.loads(p.stdout)
            check(sent["spoolReplayed"] == recorded["messages"],
                  f"D: every spooled message replayed ({sent['spoolReplayed']} of "
                  f"{recorded['messages']})")
            pb, rpc, _ = perld_it.load_stubs(tmp)
            import grpc
            query = rpc.QueryStub(grpc.insecure_channel(listen))
            run = wait_ended(query, pb, sent["runId"])
            check(run.total.records == recorded["records"] + 10,
                  f"D: the run holds both loads' records: {run.total.records} == "
                  f"{recorded['records']} + 10")

        # --- E: SIGINT while perld is away: within 2 s, counts that agree ---------------
        def interrupted(target, extra, frozen=None):
            proc = subprocess.Popen([args.perlctl, "--target", target, "--json", "load", "-writers",
                                     "1", "-time", "ns", "-seconds", "3600", "--run", "away"] + extra,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(2.5)  # recording (into the spool, or into a frozen perld)
            if frozen:
                os.kill(frozen, signal.SIGSTOP)
                time.sleep(0.5)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
            took = time.monotonic() - t0
            if frozen:
                os.kill(frozen, signal.SIGCONT)
            summary = json.loads(out) if out.strip() else {}
            return proc.returncode, took, summary, err

        rc, took, summary, err = interrupted(f"127.0.0.1:{free_port()}",
                                             ["--spool", os.path.join(tmp, "spool-e")])
        check(rc == 1 and took < 2, f"E: SIGINT with a spool and no perld: exit 1 within 2 s "
              f"({rc}, {took:.2f} s)")
        check(f"0 of {summary.get('records')} records acknowledged (messages up to 0 of "
              f"{summary.get('messages')})" in err and "kept in the spool" in err and
              "0 given up on" not in err,
              f"E: stderr's counts are the summary's, the records are in the spool: "
              f"{err.strip()[-300:]}")
        rc, took, summary, err = interrupted(listen, [], frozen=d.proc.pid)
        check(rc == 1 and took < 2, f"E: SIGINT with perld frozen: exit 1 within 2 s "
              f"({rc}, {took:.2f} s)")
        left = summary.get("records", 0) - summary.get("ackedRecords", 0)
        check(left > 0 and f"the other {left} records did not reach perld" in err,
              f"E: stderr says how many records perld does not hold: {err.strip()[-300:]}")

    except BaseException:
        # A failed check that raised: no daemon is left behind (E may have
        # frozen it).
        os.kill(d.proc.pid, signal.SIGCONT)
        d.proc.kill()
        raise
    rc = d.stop()
    check(rc == 0, f"SIGTERM: exit {rc}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
