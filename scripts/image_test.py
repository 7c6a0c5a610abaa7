#!/usr/bin/python3
"""Runs the container image and checks it serves: `make image-test` (after scripts/image.sh).

  scripts/image_test.py --pagoda build/bin/pagoda --model ../shared/models/aidreams260K/aidreams260K-f32.gguf
                        [--image localhost/pagoda:latest] [--json]

Starts the image with podman (runc, cgroupfs: ../shared/docs/containers.md) on the host network
with the model mounted at /models/model.gguf and a bearer token from PAGODA_API_KEY, then
checks, with the host's pagoda binary as the client: gRPC health SERVING; a greedy generation
equal to the same generation run in-process on the host; GET /metrics; the server process runs
as uid 10001, not root; SIGTERM (podman stop) ends it with exit code 0; started without a
token on its default 0.0.0.0 addresses it refuses to serve. Prints the image size
and what it adds to its base image. Removes its container whatever happens.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

BASE = "docker.io/library/debian:bookworm-slim"
TOKEN = "image-test-token"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def check(cond, what, results):
    results.append({"check": what, "ok": bool(cond)})
    print(f"[image-test] {'ok  ' if cond else 'FAIL'} {what}", file=sys.stderr, flush=True)
    return cond


def image_size(name):
    out = run(["podman", "image", "inspect", "--format", "{{.Size}}", name])
    return int(out.stdout.strip()) if out.returncode == 0 else 0


def wait_serving(pagoda, addr, deadline):
    while time.time() < deadline:
        r = run([pagoda, "health", "--server", addr, "--token", TOKEN])
        if r.returncode == 0 and "SERVING" in r.stdout and "NOT_SERVING" not in r.stdout:
            return r.stdout.strip()
        time.sleep(1)
    return ""


def generate(pagoda, *target):
    r = run([pagoda, "generate", *target, "--prompt", "Once upon a time", "-n", "24",
             "--temperature", "0", "--json"], timeout=120)
    if r.returncode != 0:
        return None, r.stderr.strip()
    out = json.loads(r.stdout)  # timings aside: what was generated
    return {k: out.get(k) for k in ("token_ids", "text", "finish_reason")}, ""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", default="localhost/pagoda:latest")
    p.add_argument("--pagoda", required=True, help="the host's pagoda binary (the client)")
    p.add_argument("--model", required=True, help="a GGUF file to serve")
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = p.parse_args()
    grpc_port, http_port, metrics_port = free_port(), free_port(), free_port()
    name = f"pagoda-image-test-{os.getpid()}"
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        conf = os.path.join(tmp, "containers.conf")
        with open(conf, "w") as f:
            f.write('[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\n')
        env = dict(os.environ, CONTAINERS_CONF=conf)
        model = os.path.abspath(args.model)
        start = run(["podman", "--runtime", "runc", "run", "-d", "--name", name, "--network=host",
                     "-e", f"PAGODA_API_KEY={TOKEN}",
                     "-v", f"{model}:/models/model.gguf:ro", args.image,
                     "--set", f"server.listen_address=127.0.0.1:{grpc_port}",
                     "--set", f"server.http_address=127.0.0.1:{http_port}",
                     "--set", f"server.metrics_address=127.0.0.1:{metrics_port}"], env=env)
        try:
            if not check(start.returncode == 0, f"podman run {args.image}", results):
                print(start.stderr, file=sys.stderr)
                return 1
            addr = f"127.0.0.1:{grpc_port}"
            health = wait_serving(args.pagoda, addr, time.time() + 120)
            if not check(health, "gRPC health SERVING within 120 s", results):
                print(run(["podman", "logs", name], env=env).stderr[-3000:], file=sys.stderr)
                return 1
            served, err = generate(args.pagoda, "--server", addr, "--token", TOKEN)
            local, _ = generate(args.pagoda, "-m", model)
            check(served is not None and served == local,
                  "greedy generation over gRPC equals the host's in-process one " + err, results)
            req = urllib.request.Request(f"http://127.0.0.1:{http_port}/metrics",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                body = resp.read().decode()
            check(resp.status == 200 and "# TYPE" in body, "GET /metrics answers 200", results)
            uid = run(["podman", "exec", name, "sh", "-c", "id -u"], env=env).stdout.strip()
            check(uid == "10001", f"the server runs as uid 10001 (got {uid!r})", results)
            stop = run(["podman", "stop", "-t", "40", name], env=env)
            code = run(["podman", "inspect", "--format", "{{.State.ExitCode}}", name],
                       env=env).stdout.strip()
            check(stop.returncode == 0 and code == "0", f"SIGTERM -> exit code 0 (got {code})",
                  results)
        finally:
            run(["podman", "rm", "-f", name], env=env)
        # Safe by default: on 0.0.0.0 (the image's config) without a token it must not start.
        bare = run(["podman", "--runtime", "runc", "run", "--rm", "--network=none", args.image],
                   env=env, timeout=120)
        check(bare.returncode != 0 and "allow_unauthenticated" in bare.stderr + bare.stdout,
              f"without a token the image refuses to serve on 0.0.0.0 (exit {bare.returncode})",
              results)
    size, base = image_size(args.image), image_size(BASE)
    summary = {"image": args.image, "image_mb": round(size / 1e6, 1),
               "added_to_base_mb": round((size - base) / 1e6, 1), "checks": results,
               "ok": all(r["ok"] for r in results)}
    print(f"[image-test] {args.image}: {summary['image_mb']} MB, "
          f"{summary['added_to_base_mb']} MB on top of {BASE}", file=sys.stderr)
    if args.json:
        print(json.dumps(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
