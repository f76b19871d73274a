#!/usr/bin/env python3
"""Security end to end (README "Security"), against the real perld, perlctl
and Debian's grpcio and openssl:

- tokens: no token or a wrong one is UNAUTHENTICATED, the query token reads
  but cannot ingest or control (PERMISSION_DENIED), the ingest token does
  both; SBP is closed without a token; health stays open; HTTP /api/* needs
  the query token, /metrics and the probes stay open; refusals are counted;
- a world-readable token or key file is refused at start, naming the file
  and never its content; no token appears in the daemon's log;
- TLS with mutual TLS on gRPC and HTTPS: the right CA and client
  certificate work (perlctl queries and a `perlctl load` whose records all
  arrive), a wrong CA, a missing client certificate or plaintext fail;
- an edge forwards its run upstream through TLS + mTLS + token, exactly;
- by default every listener is on loopback.
"""
import argparse
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, check, finish  # noqa: E402

import grpc  # noqa: E402


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1/localhost, a client
    certificate, and an unrelated CA; keys mode 0600."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "wrong-ca"):
        openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                "-subj", f"/CN=perld test {ca}", cwd=d)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                 "extendedKeyUsage=serverAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN=perld test {name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
                cwd=d)
    for f in os.listdir(d):
        if f.endswith(".key"):
            os.chmod(os.path.join(d, f), 0o600)
    return {k: os.path.join(d, k) for k in
            ("ca.pem", "wrong-ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


def write_secret(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def write_config(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def unary(channel, method, token=None):
    """Calls `method` with an empty request; returns the status code."""
    call = channel.unary_unary(method, request_serializer=lambda m: m,
                               response_deserializer=lambda b: b)
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    try:
        call(b"", timeout=10, metadata=metadata)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def http_get(url, token=None, context=None):
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ssl.SSLError, ConnectionError) as e:
        return 0, str(e)


def start_fails(perld, state, config):
    """Runs perld expecting it to refuse to start; returns (exit code, stderr)."""
    p = subprocess.run([perld, "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
                        "--state-dir", state, "--config", config],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stderr


def loopback_only(pid):
    """Every listening TCP socket of `pid` is bound to 127.0.0.1 or ::1."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:
                    listening.append(fields[1].split(":")[0])
    # 127.0.0.1, ::1, and 127.0.0.1 mapped into an IPv6 socket.
    loopback = {"0100007F", "00000000000000000000000001000000",
                "0000000000000000FFFF00000100007F"}
    return bool(listening) and all(a in loopback for a in listening), listening


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        pki = make_pki(tmp)
        ingest_token = "ingest-" + os.urandom(16).hex()
        query_token = "query-" + os.urandom(16).hex()
        ingest_file = write_secret(os.path.join(tmp, "ingest.token"), ingest_token + "\n")
        query_file = write_secret(os.path.join(tmp, "query.token"), query_token + "\n")
        wrong_file = write_secret(os.path.join(tmp, "wrong.token"), "not-a-token\n")

        def ctl(target, *argv, security=()):
            p = subprocess.run([args.perlctl, "--target", target, *security, *argv],
                               capture_output=True, text=True, timeout=120)
            return p.returncode, p.stdout, p.stderr

        # --- tokens on plaintext loopback -------------------------------------
        config = write_config(os.path.join(tmp, "auth.yaml"),
                              f"auth:\n  ingestTokenFile: {ingest_file}\n"
                              f"  queryTokenFile: {query_file}\n")
        log_path = os.path.join(tmp, "auth.log")
        d = Daemon(args.perld, os.path.join(tmp, "s1"), config, log=log_path)
        try:
            t = d.grpc
            rc, _, err = ctl(t, "runs")
            check(rc == 1 and "UNAUTHENTICATED" in err, f"no token: UNAUTHENTICATED ({err.strip()})")
            rc, _, err = ctl(t, "runs", security=("--token-file", wrong_file))
            check(rc == 1 and "UNAUTHENTICATED" in err, "wrong token: UNAUTHENTICATED")
            rc, _, err = ctl(t, "runs", security=("--token-file", query_file))
            check(rc == 0, f"query token reads ({err.strip()})")
            rc, _, err = ctl(t, "bench", "-writers", "1", "-records", "1000",
                             security=("--token-file", query_file))
            check(rc == 1 and "PERMISSION_DENIED" in err,
                  f"query token cannot control: PERMISSION_DENIED ({err.strip()})")
            rc, _, err = ctl(t, "--json", "load", "-writers", "1", "-records", "1000", "-time",
                             "ns", "--run", "denied-load", security=("--token-file", query_file))
            check(rc == 1 and "PERMISSION_DENIED" in (err + _),
                  "query token cannot ingest: perlctl load fails with PERMISSION_DENIED")
            rc, out, err = ctl(t, "--json", "bench", "-writers", "2", "-records", "200001",
                               "--name", "secure-bench", "--wait",
                               security=("--token-file", ingest_file))
            check(rc == 0, f"ingest token controls: bench --wait exits 0 ({err.strip()})")
            rc, out, err = ctl(t, "--json", "load", "-writers", "2", "-records", "100001",
                               "-time", "ns", "--run", "secure-load",
                               security=("--token-file", ingest_file))
            check(rc == 0, f"ingest token ingests: perlctl load exits 0 ({err.strip()[:200]})")
            # The token from the environment, as scripts set it.
            env = dict(os.environ, PERLD_TOKEN_FILE=query_file)
            p = subprocess.run([args.perlctl, "--target", t, "--json", "show", "secure-load"],
                               capture_output=True, text=True, timeout=60, env=env)
            shown = json.loads(p.stdout) if p.returncode == 0 else {}
            check(shown.get("total", {}).get("records") == 100001,
                  "$PERLD_TOKEN_FILE: show secure-load has all 100001 records")
            rc, out, _ = ctl(t, "--json", "show", "secure-bench",
                             security=("--token-file", query_file))
            shown = json.loads(out) if rc == 0 else {}
            check(shown.get("total", {}).get("records") == 200001, "bench run: 200001 records")

            channel = grpc.insecure_channel(t)
            check(unary(channel, "/Service/getVersion") == grpc.StatusCode.UNAUTHENTICATED,
                  "SBP without a token: UNAUTHENTICATED (auth.sbpOpen false)")
            check(unary(channel, "/Service/getVersion", query_token) ==
                  grpc.StatusCode.PERMISSION_DENIED, "SBP with the query token: PERMISSION_DENIED")
            check(unary(channel, "/Service/getVersion", ingest_token) == grpc.StatusCode.OK,
                  "SBP with the ingest token: OK")
            check(unary(channel, "/perld.v1.Query/ListRuns", "Bearer-less") ==
                  grpc.StatusCode.UNAUTHENTICATED, "Query with a wrong token: UNAUTHENTICATED")
            check(unary(channel, "/perld.v1.Control/StopRun", query_token) ==
                  grpc.StatusCode.PERMISSION_DENIED, "Control with the query token: denied")
            check(unary(channel, "/grpc.health.v1.Health/Check") == grpc.StatusCode.OK,
                  "gRPC health answers without a token")
            channel.close()

            base = f"http://{d.http}"
            check(http_get(base + "/healthz")[0] == 200, "/healthz open")
            check(http_get(base + "/readyz")[0] == 200, "/readyz open")
            check(http_get(base + "/")[0] == 200, "the live page's shell is open")
            check(http_get(base + "/api/runs")[0] == 401, "/api/runs without a token: 401")
            check(http_get(base + "/api/runs", "wrong")[0] == 401, "/api/runs wrong token: 401")
            status, body = http_get(base + "/api/runs", query_token)
            check(status == 200 and "secure-load" in body, "/api/runs with the query token: 200")
            status, metrics = http_get(base + "/metrics")
            check(status == 200, "/metrics open by default (auth.metricsOpen)")
            refused = {}
            for line in metrics.splitlines():
                if line.startswith("perld_auth_refused_total{"):
                    refused[line.split('"')[1]] = float(line.split()[-1])
            check(refused.get("UNAUTHENTICATED", 0) >= 6 and refused.get("PERMISSION_DENIED", 0) >= 4,
                  f"perld_auth_refused_total counts the refusals ({refused})")
        finally:
            d.stop()
        with open(log_path) as f:
            log = f.read()
        check("auth: bearer tokens required" in log, "the log says auth is on")
        check(ingest_token not in log and query_token not in log, "no token in the daemon's log")

        # --- files others can read are refused --------------------------------
        open_token = write_secret(os.path.join(tmp, "open.token"), "visible-token-xyz\n", 0o644)
        rc, err = start_fails(args.perld, os.path.join(tmp, "s2"), write_config(
            os.path.join(tmp, "open.yaml"), f"auth:\n  ingestTokenFile: {open_token}\n"))
        check(rc != 0 and open_token in err and "0644" in err and "visible-token" not in err,
              f"a world-readable token file stops the start, named, unread ({err.strip()[-160:]})")
        open_key = os.path.join(tmp, "open-server.key")
        with open(pki["server.key"]) as src:
            write_secret(open_key, src.read(), 0o604)
        rc, err = start_fails(args.perld, os.path.join(tmp, "s3"), write_config(
            os.path.join(tmp, "open-key.yaml"),
            f"tls:\n  certFile: {pki['server.pem']}\n  keyFile: {open_key}\n"))
        check(rc != 0 and open_key in err and "PRIVATE KEY" not in err,
              "a key file others can read stops the start")

        # --- TLS, mutual TLS, tokens -------------------------------------------
        config = write_config(os.path.join(tmp, "tls.yaml"),
                              f"tls:\n  certFile: {pki['server.pem']}\n"
                              f"  keyFile: {pki['server.key']}\n"
                              f"  clientCaFile: {pki['ca.pem']}\n"
                              f"auth:\n  ingestTokenFile: {ingest_file}\n"
                              f"  queryTokenFile: {query_file}\n")
        root = Daemon(args.perld, os.path.join(tmp, "s4"), config)
        try:
            t = root.grpc
            mtls = ("--ca-file", pki["ca.pem"], "--cert-file", pki["client.pem"],
                    "--key-file", pki["client.key"])
            rc, _, err = ctl(t, "runs", security=mtls + ("--token-file", query_file))
            check(rc == 0, f"TLS + client certificate + token: runs ({err.strip()})")
            rc, _, err = ctl(t, "runs", security=("--ca-file", pki["wrong-ca.pem"],
                                                  "--cert-file", pki["client.pem"],
                                                  "--key-file", pki["client.key"],
                                                  "--token-file", query_file))
            check(rc == 1 and "UNAVAILABLE" in err, f"a wrong CA fails the handshake ({err.strip()})")
            rc, _, err = ctl(t, "runs", security=("--ca-file", pki["ca.pem"],
                                                  "--token-file", query_file))
            check(rc == 1, "no client certificate: refused (mutual TLS)")
            rc, _, err = ctl(t, "runs", security=("--token-file", query_file))
            check(rc == 1, "plaintext against the TLS listener: refused")
            rc, _, err = ctl(t, "runs", security=mtls)
            check(rc == 1 and "UNAUTHENTICATED" in err, "TLS without a token: UNAUTHENTICATED")
            rc, _, err = ctl(t, "--json", "load", "-writers", "2", "-records", "50001", "-time",
                             "ns", "--mode", "windows", "--run", "tls-load",
                             security=mtls + ("--token-file", ingest_file))
            check(rc == 0, f"perlctl load over mutual TLS exits 0 ({err.strip()[:200]})")
            rc, out, _ = ctl(t, "--json", "show", "tls-load",
                             security=mtls + ("--token-file", query_file))
            shown = json.loads(out) if rc == 0 else {}
            check(shown.get("total", {}).get("records") == 50001, "tls-load: all 50001 records")

            https = f"https://{root.http}"
            good = ssl.create_default_context(cafile=pki["ca.pem"])
            good.load_cert_chain(pki["client.pem"], pki["client.key"])
            check(http_get(https + "/healthz", context=good)[0] == 200, "HTTPS + client cert")
            check(http_get(https + "/api/runs", query_token, context=good)[0] == 200,
                  "HTTPS /api/runs with the query token")
            wrong = ssl.create_default_context(cafile=pki["wrong-ca.pem"])
            wrong.load_cert_chain(pki["client.pem"], pki["client.key"])
            check(http_get(https + "/healthz", context=wrong)[0] == 0, "HTTPS with a wrong CA fails")
            anonymous = ssl.create_default_context(cafile=pki["ca.pem"])
            check(http_get(https + "/healthz", context=anonymous)[0] == 0,
                  "HTTPS without a client certificate fails")
            check(http_get(f"http://{root.http}/healthz")[0] == 0, "plain HTTP is not served")

            # An edge (no auth of its own, loopback) forwards to this root.
            edge_config = write_config(
                os.path.join(tmp, "edge.yaml"),
                f"upstream:\n  target: {t}\n  nodeId: secure-edge\n"
                f"  caFile: {pki['ca.pem']}\n  certFile: {pki['client.pem']}\n"
                f"  keyFile: {pki['client.key']}\n  tokenFile: {ingest_file}\n"
                "reportingIntervalMs: 200\n")
            edge = Daemon(args.perld, os.path.join(tmp, "s5"), edge_config)
            try:
                rc, _, err = ctl(edge.grpc, "bench", "-writers", "1", "-records", "30001",
                                 "-time", "ns", "--name", "edge-run", "--wait")
                check(rc == 0, f"edge bench ({err.strip()})")
            finally:
                edge.stop()
            records = None
            deadline = time.time() + 60
            while time.time() < deadline:
                rc, out, _ = ctl(t, "--json", "show", "edge-run",
                                 security=mtls + ("--token-file", query_file))
                if rc == 0:
                    shown = json.loads(out)
                    records = shown.get("total", {}).get("records")
                    if shown.get("state") != "running":
                        break
                time.sleep(0.2)
            check(records == 30001, f"the edge's run reached the root through mTLS: {records}")
        finally:
            root.stop()

        # --- loopback by default ------------------------------------------------
        p = subprocess.run([args.perld, "--check-config"], capture_output=True, text=True)
        check('grpcListen: "127.0.0.1:9717"' in p.stdout and
              'httpListen: "127.0.0.1:9719"' in p.stdout, "the defaults listen on loopback")
        d = Daemon(args.perld, os.path.join(tmp, "s6"))
        try:
            ok, listening = loopback_only(d.proc.pid)
            check(ok, f"every listening socket is on loopback ({listening})")
        finally:
            d.stop()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
