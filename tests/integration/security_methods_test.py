#!/usr/bin/env python3
"""Every gRPC method needs a token when auth is on (issue 24), checked from
the service descriptors, not from a list kept by hand: every .proto under
proto/perld/ and proto/sbp/ is compiled, and every method of every service
in them -- perld.v1 Query, Control, Ingest, SBK's SBP `Service`, and any
added later -- is called without a token (unary: a default request;
streaming: opened, a default message sent) and must answer UNAUTHENTICATED.
A method that forgets its check fails here. Server reflection, which has no
token check of its own, is off while auth is on (UNIMPLEMENTED); health
stays open for probes.

  /usr/bin/python3 tests/integration/security_methods_test.py --perld build/release/daemon/bench/perld
"""
import argparse
import glob
import importlib
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import ROOT, Daemon, check, finish  # noqa: E402

import grpc  # noqa: E402
from google.protobuf import symbol_database  # noqa: E402


def compile_protos(out):
    """pb2 modules of every .proto of perld's services."""
    import grpc_tools
    from grpc_tools import protoc
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    include = os.path.join(ROOT, "proto")
    protos = sorted(os.path.relpath(p, include) for pattern in ("perld/**/*.proto", "sbp/*.proto")
                    for p in glob.glob(os.path.join(include, pattern), recursive=True))
    modules = []
    for proto in protos:
        rc = protoc.main(["protoc", "-I" + include, "-I" + well_known,
                          "--python_out=" + out, proto])
        if rc != 0:
            raise RuntimeError("grpc_tools.protoc failed for " + proto)
    sys.path.insert(0, out)
    for proto in protos:
        modules.append(importlib.import_module(proto[:-len(".proto")].replace("/", ".") + "_pb2"))
    return modules


def call(channel, method, metadata=None):
    """Calls `method` (a MethodDescriptor) with a default message; the code."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    request = symbol_database.Default().GetSymbol(method.input_type.full_name)()
    response = symbol_database.Default().GetSymbol(method.output_type.full_name)
    kind = {(False, False): channel.unary_unary, (False, True): channel.unary_stream,
            (True, False): channel.stream_unary, (True, True): channel.stream_stream}[
        (method.client_streaming, method.server_streaming)]
    stub = kind(path, request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response.FromString)
    argument = iter([request]) if method.client_streaming else request
    try:
        answer = stub(argument, timeout=10, metadata=metadata)
        if method.server_streaming:
            for _ in answer:
                pass
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        methods = [m for module in compile_protos(tmp)
                   for service in module.DESCRIPTOR.services_by_name.values()
                   for m in service.methods]
        services = {m.containing_service.full_name for m in methods}
        check({"perld.v1.Query", "perld.v1.Control", "perld.v1.Ingest", "Service"} <= services,
              f"the descriptors name every service ({sorted(services)})")

        token = os.path.join(tmp, "ingest.token")
        with open(token, "w") as f:
            f.write("ingest-" + os.urandom(8).hex() + "\n")
        os.chmod(token, 0o600)
        config = os.path.join(tmp, "auth.yaml")
        with open(config, "w") as f:
            f.write(f"auth:\n  ingestTokenFile: {token}\n")
        d = Daemon(args.perld, os.path.join(tmp, "state"), config)
        channel = grpc.insecure_channel(d.grpc)
        try:
            for m in methods:
                code = call(channel, m)
                check(code == grpc.StatusCode.UNAUTHENTICATED,
                      f"/{m.containing_service.full_name}/{m.name} without a token: {code.name}")
            with open(token) as f:
                bearer = (("authorization", "Bearer " + f.read().strip()),)
            for version in ("v1alpha", "v1"):
                path = f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo"
                list_services = b"\x3a\x01*"  # ServerReflectionRequest{list_services: "*"}
                for metadata in (None, bearer):
                    stub = channel.stream_stream(path)
                    try:
                        replies = list(stub(iter([list_services]), timeout=10, metadata=metadata))
                        code = grpc.StatusCode.OK if replies else grpc.StatusCode.UNKNOWN
                    except grpc.RpcError as e:
                        code = e.code()
                    check(code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAUTHENTICATED),
                          f"reflection {version} {'with' if metadata else 'without'} a token is "
                          f"unavailable while auth is on: {code.name}")
            health = channel.unary_unary("/grpc.health.v1.Health/Check")
            try:
                health(b"", timeout=10)
                code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                code = e.code()
            check(code == grpc.StatusCode.OK, f"health stays open: {code.name}")
        finally:
            channel.close()
            check(d.stop() == 0, "daemon stops cleanly")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
