#!/usr/bin/python3
"""Soak test: thousands of mixed requests over gRPC and HTTP against one small server.

  soak_test.py --pagoda BIN --repo DIR --shared DIR [--requests 10000] [--concurrency 16]
               [--seed 1] [--json]

The server (aidreams260K) runs with a deliberately tight pool: 24 KV blocks of 16 tokens and
engine.max_num_seqs 8, so preemption and n > 1 admission are exercised all the time. The mix
(seeded): valid streaming / unary gRPC requests and HTTP completions (streaming or not) with n
up to 8, of which 20% are cancelled mid-flight (gRPC cancel, or the HTTP client closing the
socket); requests with short deadlines; prompts longer than the context; oversized request ids;
invalid fields and invalid JSON. Passes when:
  - every valid request that was neither cancelled nor given a short deadline succeeds, and
    nothing ever answers INTERNAL / UNKNOWN / UNAVAILABLE or HTTP 5xx;
  - every invalid request is answered INVALID_ARGUMENT / HTTP 400;
  - the server is alive at the end, with running / waiting requests and referenced KV blocks
    (num_kv_blocks_used) at 0 within 5 s of the last request;
  - resident memory at the end is < 10% above its level after the first 10% of requests
    (with --sanitized, an ASan build, growth is reported but not judged: ASan holds freed
    memory in its quarantine; LeakSanitizer at the server's exit judges leaks instead);
  - SIGTERM then ends the server with exit code 0 and no sanitizer report in its output.
Progress is printed every 10%; --json prints the summary as one JSON object.
"""
import argparse
import collections
import concurrent.futures
import http.client
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_e2e_test as base  # noqa: E402  (compile_protos)
from pagoda_server import PagodaServer  # noqa: E402

PROMPTS = ["Once upon a time", "The little dog", "Lily wanted to", "One day, a bird",
           "Tom and Sue went to the park and", "The sun was"]


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Soak:
    def __init__(self, args, server, pb, grpc):
        self.args, self.server, self.pb, self.grpc = args, server, pb, grpc
        self.channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        self.stub = base.pb_grpc.GenerationStub(self.channel)
        self.counts = collections.Counter()
        self.failures = []  # the first 20, for the report
        self.num_failures = 0
        self.lock = threading.Lock()

    def record(self, kind, outcome, ok, detail=""):
        with self.lock:
            self.counts[f"{kind}:{outcome}"] += 1
            if not ok:
                self.num_failures += 1
                if len(self.failures) < 20:
                    self.failures.append(f"{kind}: {outcome} {detail}"[:300])

    # --- gRPC -----------------------------------------------------------------------------
    def grpc_request(self, rng, prompt, n, max_tokens, request_id=""):
        pb = self.pb
        return pb.GenerateRequest(
            request_id=request_id, prompt=prompt,
            sampling=pb.SamplingParams(temperature=rng.choice([0.0, 0.8, 1.0]), n=n,
                                       seed=rng.randrange(1 << 30)),
            stopping=pb.StoppingCriteria(max_tokens=max_tokens))

    def run_grpc(self, rng, kind):
        pb, grpc = self.pb, self.grpc
        prompt, n, max_tokens = rng.choice(PROMPTS), rng.randint(1, 8), rng.randint(1, 24)
        timeout = None
        expect = {grpc.StatusCode.OK}
        if kind == "grpc_long_prompt":
            req = pb.GenerateRequest(prompt_token_ids=pb.TokenIds(ids=[5] * 600),
                                     stopping=pb.StoppingCriteria(max_tokens=4))
            expect = {grpc.StatusCode.INVALID_ARGUMENT}
        elif kind == "grpc_huge_id":
            req = self.grpc_request(rng, prompt, 1, 4, request_id="x" * rng.choice([300, 70000]))
            expect = {grpc.StatusCode.INVALID_ARGUMENT}
        elif kind == "grpc_invalid":
            req = self.grpc_request(rng, prompt, n, max_tokens)
            field = rng.choice(["temperature", "top_p", "n", "max_tokens", "top_logprobs"])
            if field == "max_tokens":
                req.stopping.max_tokens = 0
            else:
                setattr(req.sampling, field, {"temperature": -1.0, "top_p": 1.5, "n": 0,
                                              "top_logprobs": 99}[field])
            expect = {grpc.StatusCode.INVALID_ARGUMENT}
        else:
            req = self.grpc_request(rng, prompt, n, max_tokens)
            if kind == "grpc_deadline":
                timeout = rng.uniform(0.001, 0.05)
                expect = {grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED}
        try:
            if kind == "grpc_unary":
                self.stub.Complete(req, timeout=timeout)
            elif kind == "grpc_cancel":
                call = self.stub.Generate(req)
                for i, _ in enumerate(call):
                    if i >= rng.randint(0, 3):
                        break
                call.cancel()
            else:
                for _ in self.stub.Generate(req, timeout=timeout):
                    pass
            code, detail = grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            code, detail = e.code(), e.details() or ""
        if kind == "grpc_cancel" and code in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED):
            code = grpc.StatusCode.OK
        self.record(kind, code.name, code in expect, detail)

    # --- HTTP -----------------------------------------------------------------------------
    def run_http(self, rng, kind):
        body = {"prompt": rng.choice(PROMPTS), "max_tokens": rng.randint(1, 24),
                "n": rng.randint(1, 8), "temperature": rng.choice([0.0, 0.9]),
                "seed": rng.randrange(1 << 30), "stream": rng.random() < 0.5}
        expect = {200}
        if kind == "http_invalid":
            field = rng.choice(["temperature", "n", "max_tokens", "json", "prompt"])
            if field == "json":
                raw = b'{"prompt": "hi", "max_tokens": '
            else:
                body[field] = {"temperature": -2, "n": 0, "max_tokens": -1, "prompt": 17}[field]
                raw = json.dumps(body).encode()
            expect = {400}
        elif kind == "http_long_prompt":
            body["prompt"] = [5] * 600
            raw, expect = json.dumps(body).encode(), {400}
        else:
            if kind == "http_cancel":
                body["stream"] = True
            raw = json.dumps(body).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=120)
        try:
            conn.request("POST", "/v1/completions", body=raw,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if kind == "http_cancel" and resp.status == 200:
                resp.read(rng.randint(1, 200))  # some of the stream, then hang up
                conn.sock.shutdown(socket.SHUT_RDWR)
                status, text = 200, ""
            else:
                status, text = resp.status, resp.read().decode(errors="replace")
                if status == 200 and body.get("stream") and not text.rstrip().endswith("[DONE]"):
                    status, text = 599, "stream did not end with [DONE]: " + text[-200:]
        except (OSError, http.client.HTTPException) as e:
            status, text = 598, repr(e)
        finally:
            conn.close()
        self.record(kind, str(status), status in expect, text[:200])

    def one(self, i):
        rng = random.Random(self.args.seed * 1_000_003 + i)
        kind = rng.choices(
            ["grpc_stream", "grpc_unary", "grpc_cancel", "grpc_deadline", "grpc_long_prompt",
             "grpc_huge_id", "grpc_invalid", "http_ok", "http_cancel", "http_invalid",
             "http_long_prompt"],
            weights=[24, 10, 10, 8, 3, 3, 6, 16, 10, 6, 4])[0]
        (self.run_grpc if kind.startswith("grpc") else self.run_http)(rng, kind)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pagoda", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--shared", required=True)
    p.add_argument("--requests", type=int, default=10000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    p.add_argument("--sanitized", action="store_true",
                   help="the server is an ASan build: RSS growth is not judged")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base.ARGS = args
        base.compile_protos(tmp)
        pb, grpc = base.pb, base.grpc
        model = os.path.join(args.shared, "models/aidreams260K/aidreams260K-f32.gguf")
        server = PagodaServer(args.pagoda, "kv_cache.num_blocks=24", "kv_cache.block_size=16",
                              "engine.max_num_seqs=8", model=model)
        try:
            summary = run(args, server, pb, grpc)
            summary.update(shutdown(server))
        finally:
            server.stop()
    summary["ok"] = (summary["num_failures"] == 0 and summary["alive"] and summary["idle"] and
                     summary["num_kv_blocks_used"] == 0 and
                     (args.sanitized or summary["rss_growth"] < 0.10) and
                     summary["exit_code"] == 0 and not summary["sanitizer_report"])
    print(json.dumps(summary, indent=None if args.json else 1))
    return 0 if summary["ok"] else 1


def shutdown(server):
    """SIGTERM, then the exit code and whether the output holds a sanitizer report."""
    exit_code = server.terminate(timeout=60)
    out = server.output()
    return {"exit_code": exit_code,
            "sanitizer_report": "ERROR: AddressSanitizer" in out or
                                "ERROR: LeakSanitizer" in out or "runtime error:" in out}


def run(args, server, pb, grpc):
    soak = Soak(args, server, pb, grpc)
    start, rss_warm = time.time(), None
    warm_at = max(1, args.requests // 10)
    done = 0
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        for fut in concurrent.futures.as_completed(
                [pool.submit(soak.one, i) for i in range(args.requests)]):
            fut.result()
            done += 1
            if done == warm_at:
                rss_warm = rss_kb(server.proc.pid)
            if done % warm_at == 0:
                print(f"[soak] {done}/{args.requests} requests, {time.time() - start:.0f} s, "
                      f"rss {rss_kb(server.proc.pid) // 1024} MiB", file=sys.stderr, flush=True)
    alive = server.proc.poll() is None
    idle = alive and server.wait_idle(timeout=5)
    blocks = server.metric("pagoda:num_kv_blocks_used") if alive else -1
    rss_end = rss_kb(server.proc.pid) if alive else 0
    growth = (rss_end - rss_warm) / rss_warm if rss_warm else 1.0
    summary = {"requests": args.requests, "seconds": round(time.time() - start, 1),
               "outcomes": dict(sorted(soak.counts.items())), "num_failures": soak.num_failures,
               "failures": soak.failures,
               "alive": alive, "idle": idle, "num_kv_blocks_used": blocks,
               "rss_after_warmup_mib": rss_warm // 1024 if rss_warm else None,
               "rss_end_mib": rss_end // 1024, "rss_growth": round(growth, 3)}
    return summary


if __name__ == "__main__":
    sys.exit(main())
