#!/usr/bin/env python3
"""End-to-end tests of `pagoda serve` driven by an independent client (Debian's python3-grpcio).

The client stubs are compiled from the repository's .proto files at test time with the system
protoc and grpc_python_plugin. Every server runs on a free loopback port and is stopped at the
end. Usage: server_e2e_test.py --pagoda BIN --repo DIR --shared DIR
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pagoda_server import PagodaServer  # noqa: E402

ARGS = None
pb = pb_grpc = health_pb = health_grpc = refl_pb = refl_grpc = None
grpc = None


def compile_protos(out_dir):
    """Generates the Python stubs and imports them."""
    global pb, pb_grpc, health_pb, health_grpc, refl_pb, refl_grpc, grpc
    import grpc as grpc_module
    grpc = grpc_module
    proto_root = os.path.join(ARGS.repo, "proto")
    test_root = os.path.join(ARGS.repo, "tests", "e2e", "protos")
    # health.proto is compiled from a flat copy so its Python module does not live under the
    # `grpc` package name (which the grpcio library owns).
    flat = os.path.join(out_dir, "flat")
    os.makedirs(flat)
    shutil.copy(os.path.join(proto_root, "grpc/health/v1/health.proto"), flat)
    for root, rel in ((proto_root, "pagoda/v1/generation.proto"),
                      (flat, "health.proto"),
                      (test_root, "reflection.proto")):
        subprocess.run(["protoc", f"--proto_path={root}", f"--python_out={out_dir}",
                        f"--grpc_python_out={out_dir}",
                        "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
                        os.path.join(root, rel)], check=True)
    sys.path.insert(0, out_dir)
    from pagoda.v1 import generation_pb2, generation_pb2_grpc
    import health_pb2
    import health_pb2_grpc
    import reflection_pb2
    import reflection_pb2_grpc
    pb, pb_grpc = generation_pb2, generation_pb2_grpc
    health_pb, health_grpc = health_pb2, health_pb2_grpc
    refl_pb, refl_grpc = reflection_pb2, reflection_pb2_grpc


class Server(PagodaServer):
    """A `pagoda serve` process (tests/e2e/pagoda_server.py) with a gRPC channel and stub on its
    gRPC port, `port`. `cacert`: the PEM file that signed its TLS certificate (server.tls),
    for a TLS channel and https requests."""

    def __init__(self, *sets, model=None, config=None, env=None, cacert=None):
        super().__init__(ARGS.pagoda, *sets, model=model, config=config, env=env, cacert=cacert)
        self.port = self.grpc_port
        if cacert:
            with open(cacert, "rb") as f:
                creds = grpc.ssl_channel_credentials(f.read())
            self.channel = grpc.secure_channel(
                f"127.0.0.1:{self.port}", creds,
                options=[("grpc.ssl_target_name_override", "localhost")])
        else:
            self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = pb_grpc.GenerationStub(self.channel)

    def stop(self):
        self.channel.close()
        super().stop()


def CHATML_TEMPLATE():
    """A real ChatML template of the shared corpus (OpenHermes 2.5)."""
    return os.path.join(ARGS.shared, "chat-templates/chatml-openhermes-2.5.jinja")


def greedy_request(prompt, max_tokens, **kw):
    return pb.GenerateRequest(prompt=prompt, sampling=pb.SamplingParams(temperature=0.0),
                              stopping=pb.StoppingCriteria(max_tokens=max_tokens), **kw)


def stream_tokens(stub, request, **kw):
    tokens, text, finish = [], "", None
    for resp in stub.Generate(request, **kw):
        tokens += list(resp.token_ids)
        text += resp.text
        finish = resp.finish_reason or finish
    return tokens, text, finish


class AidreamsTest(unittest.TestCase):
    """Correctness, concurrency, validation and observability on the aidreams260K model."""

    @classmethod
    def setUpClass(cls):
        cls.model = os.path.join(ARGS.shared, "models/aidreams260K/aidreams260K-f32.gguf")
        with open(os.path.join(ARGS.shared, "models/aidreams260K/reference.json")) as f:
            cls.ref = json.load(f)
        cls.server = Server("engine.max_num_seqs=32", model=cls.model)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def expected(self, case):
        ctx = self.ref["config"]["seq_len"]
        return case["greedy_tokens"][:ctx - len(case["prompt_tokens"])]

    def request_for(self, case):
        return pb.GenerateRequest(
            prompt_token_ids=pb.TokenIds(ids=case["prompt_tokens"]),
            sampling=pb.SamplingParams(temperature=0.0),
            stopping=pb.StoppingCriteria(max_tokens=len(case["greedy_tokens"]),
                                         stop_token_ids=[1]))

    def test_streamed_greedy_tokens_match_reference(self):
        for case in self.ref["cases"]:
            tokens, _, finish = stream_tokens(self.server.stub, self.request_for(case))
            self.assertEqual(tokens, self.expected(case), case["prompt"])
            self.assertEqual(finish, "length")

    def test_text_prompt_tokenizes_like_reference(self):
        case = self.ref["cases"][2]
        tok = self.server.stub.Tokenize(pb.TokenizeRequest(text=case["prompt"]))
        self.assertEqual(list(tok.token_ids), case["prompt_tokens"])
        detok = self.server.stub.Detokenize(pb.DetokenizeRequest(token_ids=tok.token_ids))
        self.assertEqual(detok.text, case["prompt"])

    def test_complete_equals_concatenated_stream(self):
        req = greedy_request("Whispers of vectors", 60)
        tokens, text, finish = stream_tokens(self.server.stub, req)
        resp = self.server.stub.Complete(req)
        self.assertEqual(list(resp.completions[0].token_ids), tokens)
        self.assertEqual(resp.completions[0].text, text)
        self.assertEqual(resp.completions[0].finish_reason, finish)
        self.assertEqual(resp.usage.completion_tokens, len(tokens))

    def test_32_concurrent_streams(self):
        cases = [self.ref["cases"][i % len(self.ref["cases"])] for i in range(32)]
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            futures = [pool.submit(stream_tokens, self.server.stub, self.request_for(c))
                       for c in cases]
            for case, fut in zip(cases, futures):
                self.assertEqual(fut.result()[0], self.expected(case))

    def test_logit_bias_forces_and_bans_tokens(self):
        """SamplingParams.logit_bias: +100 on one id makes greedy emit only it; -100 on the
        reference's first token makes greedy choose another; logprobs stay the model's own."""
        case = self.ref["cases"][0]
        expected = self.expected(case)
        forced = next(t for t in range(100, 200) if t not in expected[:8])
        req = self.request_for(case)
        req.stopping.max_tokens = 8
        req.sampling.logprobs = True
        req.sampling.logit_bias[forced] = 100.0
        resp = self.server.stub.Complete(req)
        completion = resp.completions[0]
        self.assertEqual(list(completion.token_ids), [forced] * 8)
        # Not the model's argmax, so its raw probability is at most 1/2.
        self.assertLess(completion.logprobs[0].logprob, -0.6)
        self.assertEqual(stream_tokens(self.server.stub, req)[0], [forced] * 8)
        banned = self.request_for(case)
        banned.stopping.max_tokens = 4
        banned.sampling.logit_bias[expected[0]] = -100.0
        tokens = stream_tokens(self.server.stub, banned)[0]
        self.assertTrue(tokens)
        self.assertNotIn(expected[0], tokens)
        for bias, detail in (({99999: 1.0}, "logit_bias.99999: token id outside the vocabulary"),
                             ({5: 100.5}, "logit_bias.5: bias must be in [-100, 100]")):
            bad = self.request_for(case)
            for token, value in bias.items():
                bad.sampling.logit_bias[token] = value
            with self.assertRaises(grpc.RpcError) as cm:
                self.server.stub.Complete(bad)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertTrue(cm.exception.details().startswith(detail), cm.exception.details())

    def test_validation_errors(self):
        ctx = self.ref["config"]["seq_len"]
        bad = [
            ("no input", pb.GenerateRequest()),
            ("empty prompt", pb.GenerateRequest(prompt="")),
            ("empty ids", pb.GenerateRequest(prompt_token_ids=pb.TokenIds(ids=[]))),
            ("too long", pb.GenerateRequest(prompt_token_ids=pb.TokenIds(ids=[5] * (ctx + 1)))),
            ("max_tokens 0", greedy_request("hi", 0)),
            ("max_tokens huge", greedy_request("hi", 10**6)),
            ("temperature", pb.GenerateRequest(prompt="hi",
                                               sampling=pb.SamplingParams(temperature=-1))),
            ("top_p", pb.GenerateRequest(prompt="hi", sampling=pb.SamplingParams(top_p=1.5))),
            ("top_logprobs", pb.GenerateRequest(prompt="hi",
                                                sampling=pb.SamplingParams(top_logprobs=99))),
            ("vocab", pb.GenerateRequest(prompt_token_ids=pb.TokenIds(ids=[1, 99999]))),
        ]
        for name, req in bad:
            for call in (self.server.stub.Complete, lambda r: list(self.server.stub.Generate(r))):
                with self.assertRaises(grpc.RpcError, msg=name) as cm:
                    call(req)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, name)
                self.assertTrue(cm.exception.details(), name)
        with self.assertRaises(grpc.RpcError) as cm:
            self.server.stub.Detokenize(pb.DetokenizeRequest(token_ids=[12345678]))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_model_info_health_and_reflection(self):
        info = self.server.stub.GetModelInfo(pb.GetModelInfoRequest())
        self.assertEqual(info.vocab_size, 512)
        self.assertEqual(info.context_length, 128)
        self.assertEqual(info.backend, "cpu")
        health = health_grpc.HealthStub(self.server.channel)
        status = health.Check(health_pb.HealthCheckRequest(service=""))
        self.assertEqual(status.status, health_pb.HealthCheckResponse.SERVING)
        refl = refl_grpc.ServerReflectionStub(self.server.channel)
        responses = refl.ServerReflectionInfo(
            iter([refl_pb.ServerReflectionRequest(list_services="")]))
        names = [s.name for r in responses for s in r.list_services_response.service]
        self.assertIn("pagoda.v1.Generation", names)
        self.assertIn("grpc.health.v1.Health", names)

    def test_metrics_parse_and_count(self):
        self.assertTrue(self.server.wait_idle())
        before = self.server.metric("pagoda:generation_tokens_total")
        before_ok = self.server.metric("pagoda:request_success_total", 'finished_reason="length"')
        for _ in range(3):
            stream_tokens(self.server.stub, greedy_request("I dream of", 7))
        text = self.server.metrics()
        sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?[0-9.eE+-]+(Inf)?$')
        for line in text.splitlines():
            if line and not line.startswith("#"):
                self.assertRegex(line, sample)
        self.assertEqual(self.server.metric("pagoda:generation_tokens_total") - before, 21)
        self.assertEqual(self.server.metric("pagoda:request_success_total",
                                            'finished_reason="length"') - before_ok, 3)
        self.assertGreaterEqual(self.server.metric("pagoda:time_to_first_token_seconds_count"), 3)


    def test_messages_need_a_chat_template(self):
        req = pb.GenerateRequest(messages=pb.ChatMessages(messages=[
            pb.ChatMessage(role="user", content="hello")]),
            stopping=pb.StoppingCriteria(max_tokens=4))
        with self.assertRaises(grpc.RpcError) as cm:
            self.server.stub.Complete(req)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("chat template", cm.exception.details())

    def test_bench_serve_smoke(self):
        proc = subprocess.run([ARGS.pagoda, "bench", "serve", "--server",
                               f"127.0.0.1:{self.server.port}", "-c", "4", "-n", "8",
                               "--prompt-len", "8", "--gen-len", "6", "--json"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = json.loads(proc.stdout)
        self.assertEqual(out["failed"], 0)
        self.assertEqual(out["generated_tokens"], 8 * 6)
        self.assertEqual(out["ttft_s"]["count"], 8)
        self.assertGreater(out["tokens_per_s"], 0)


class LongGenerationTest(unittest.TestCase):
    """Cancellation, deadlines, queue limits and shutdown need long generations: a synthetic model
    with a 1024-token context."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.model = os.path.join(cls.tmp, "tiny.gguf")
        subprocess.run([ARGS.pagoda, "make-model", "-q", "--preset", "tiny", "--context", "1024",
                        "-o", cls.model], check=True)
        # The tiny model decodes ~4000 tokens/s: a generation that must still run a second later
        # needs thousands of tokens, so a longer context.
        cls.long_model = os.path.join(cls.tmp, "tiny-8k.gguf")
        subprocess.run([ARGS.pagoda, "make-model", "-q", "--preset", "tiny", "--context", "8192",
                        "-o", cls.long_model], check=True)

    def long_request(self, n=900):
        return pb.GenerateRequest(prompt="Once upon a time",
                                  sampling=pb.SamplingParams(temperature=0.8, seed=1),
                                  stopping=pb.StoppingCriteria(max_tokens=n, ignore_eos=True))

    def test_cancel_and_deadline_free_blocks(self):
        server = Server(model=self.model)
        try:
            call = server.stub.Generate(self.long_request())
            next(call)
            next(call)
            call.cancel()
            with self.assertRaises(grpc.RpcError) as cm:
                list(server.stub.Generate(self.long_request(), timeout=0.05))
            self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
            self.assertTrue(server.wait_idle())
            self.assertEqual(server.metric("pagoda:kv_cache_usage_perc"), 0.0)
            self.assertGreaterEqual(server.metric("pagoda:request_success_total",
                                                  'finished_reason="abort"'), 2)
        finally:
            server.stop()

    def test_full_queue_gives_resource_exhausted(self):
        server = Server("engine.max_num_seqs=1", "server.max_waiting_requests=1",
                        model=self.model)
        try:
            calls = [server.stub.Generate(self.long_request()) for _ in range(6)]
            codes = []
            for c in calls:
                try:
                    next(c)
                    codes.append("ok")
                except grpc.RpcError as e:
                    codes.append(e.code())
            self.assertIn(grpc.StatusCode.RESOURCE_EXHAUSTED, codes)
            for c in calls:
                c.cancel()
        finally:
            server.stop()

    def test_messages_render_with_the_configured_template(self):
        server = Server("model.chat_template=" + CHATML_TEMPLATE(), model=self.model)
        try:
            msgs = [pb.ChatMessage(role="system", content="Be brief."),
                    pb.ChatMessage(role="user", content="Hello")]
            req = pb.GenerateRequest(messages=pb.ChatMessages(messages=msgs),
                                     sampling=pb.SamplingParams(temperature=0),
                                     stopping=pb.StoppingCriteria(max_tokens=5))
            resp = server.stub.Complete(req)
            rendered = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello"
                        "<|im_end|>\n<|im_start|>assistant\n")
            tok = server.stub.Tokenize(pb.TokenizeRequest(text=rendered))
            self.assertEqual(resp.usage.prompt_tokens, len(tok.token_ids))
            self.assertGreater(len(resp.completions[0].token_ids), 0)
        finally:
            server.stop()

    def test_tls_on_grpc_and_http(self):
        """One self-signed certificate (server.tls) serves gRPC, the HTTP API and the metrics
        listener; clients verify it, and plaintext clients are refused."""
        tmp = tempfile.mkdtemp()
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-keyout", key, "-out", cert, "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True)
        server = Server(f"server.tls.cert_file={cert}", f"server.tls.key_file={key}",
                        model=self.model, cacert=cert)
        try:
            info = server.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
            self.assertEqual(info.context_length, 1024)
            resp = server.stub.Complete(greedy_request("Once", 3), timeout=30)
            self.assertEqual(len(resp.completions[0].token_ids), 3)
            self.assertTrue(server.url.startswith("https://"), server.url)
            # Greedy, like the gRPC request above: a sampled token may be EOS and end it early.
            status, body = server.json("/v1/completions",
                                       {"prompt": "Once", "max_tokens": 3, "temperature": 0})
            self.assertEqual(status, 200, body)
            self.assertEqual(body["usage"]["completion_tokens"], 3)
            self.assertEqual(server.curl("/health"), (200, b"ok\n"))
            self.assertEqual(server.metric("pagoda:request_success_total",
                                           'finished_reason="length"'), 2)  # https :metrics
            for port in (server.http_port, server.metrics_port):  # plaintext is refused
                plain = subprocess.run(["curl", "-s", "-m", "10", "-o", "/dev/null", "-w",
                                        "%{http_code}", f"http://127.0.0.1:{port}/health"],
                                       capture_output=True, text=True)
                self.assertNotEqual(plain.stdout, "200")
            with grpc.insecure_channel(f"127.0.0.1:{server.port}") as plain:
                with self.assertRaises(grpc.RpcError) as cm:
                    pb_grpc.GenerationStub(plain).GetModelInfo(pb.GetModelInfoRequest(),
                                                               timeout=5)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        finally:
            server.stop()
        # Key material that cannot serve fails start-up with the file and the reason, whether or
        # not an HTTP listener is configured (gRPC alone used to say only "cannot listen").
        bad, other_key = os.path.join(tmp, "bad.pem"), os.path.join(tmp, "other-key.pem")
        with open(bad, "w") as f:
            f.write("not a certificate")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-out", other_key],
                       check=True, capture_output=True)
        cases = [((bad, bad, "127.0.0.1:0"), f"server.tls.cert_file: '{bad}' is not a PEM"),
                 ((bad, bad, ""), f"server.tls.cert_file: '{bad}' is not a PEM"),
                 ((cert, bad, ""), f"server.tls.key_file: '{bad}' is not an unencrypted PEM"),
                 ((cert, other_key, ""), f"server.tls.key_file: '{other_key}' does not match")]
        try:
            for (cert_file, key_file, http), expected in cases:
                proc = subprocess.run([ARGS.pagoda, "serve", "--model", self.model,
                                       "--set", "server.listen_address=127.0.0.1:0",
                                       "--set", "server.metrics_address=",
                                       "--set", f"server.http_address={http}",
                                       "--set", f"server.tls.cert_file={cert_file}",
                                       "--set", f"server.tls.key_file={key_file}"],
                                      capture_output=True, text=True, timeout=60)
                self.assertNotEqual(proc.returncode, 0, proc.stderr)
                self.assertIn("error: " + expected, proc.stderr)
        finally:
            shutil.rmtree(tmp)

    def test_bearer_token(self):
        server = Server("server.auth.bearer_token=s3cret", model=self.model)
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                server.stub.GetModelInfo(pb.GetModelInfoRequest())
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            info = server.stub.GetModelInfo(pb.GetModelInfoRequest(),
                                            metadata=[("authorization", "Bearer s3cret")])
            self.assertEqual(info.context_length, 1024)
            health = health_grpc.HealthStub(server.channel)  # exempt
            self.assertEqual(health.Check(health_pb.HealthCheckRequest()).status,
                             health_pb.HealthCheckResponse.SERVING)
        finally:
            server.stop()

    def test_sigterm_drains_and_exits_zero(self):
        # The grace period is far longer than the generations need even on a slow, shared CI
        # machine: what is tested is that requests in flight at SIGTERM finish, not a deadline.
        server = Server("server.shutdown_grace_seconds=600", model=self.long_model)
        n = 2000
        results, received = {}, [0] * 4
        started = threading.Barrier(5)

        def run(i):
            finish = None
            try:
                for resp in server.stub.Generate(self.long_request(n)):
                    if received[i] == 0:
                        started.wait()
                    received[i] += len(resp.token_ids)
                    finish = resp.finish_reason or finish
                results[i] = finish
            except grpc.RpcError as e:
                results[i] = e.code()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        started.wait(timeout=120)  # every stream has its first token: all four are running
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        with self.assertRaises(grpc.RpcError) as cm:
            server.stub.Complete(self.long_request(5))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        for t in threads:
            t.join()
        self.assertEqual(server.proc.wait(timeout=600), 0, server.output())
        self.assertEqual([results[i] for i in range(4)], ["length"] * 4)
        self.assertEqual(received, [n] * 4)
        self.assertIn("shut down cleanly", server.output())
        server.stop()

    def test_grace_period_aborts_the_rest(self):
        server = Server("server.shutdown_grace_seconds=0", model=self.model)
        call = server.stub.Generate(self.long_request(1000))
        next(call)
        server.proc.send_signal(signal.SIGTERM)
        tokens = 0
        finish = None
        try:
            for r in call:
                tokens += len(r.token_ids)
                finish = r.finish_reason or finish
        except grpc.RpcError:
            finish = "rpc-error"
        self.assertEqual(server.proc.wait(timeout=60), 0)
        self.assertIn(finish, ("abort", "rpc-error"))
        server.stop()


class HardeningTest(unittest.TestCase):
    """Hostile and heavy input against a small server (8 sequences, 24 KV blocks): n > 1 never
    overflows the batch, oversized ids and prompts are refused with INVALID_ARGUMENT."""

    @classmethod
    def setUpClass(cls):
        model = os.path.join(ARGS.shared, "models/aidreams260K/aidreams260K-f32.gguf")
        cls.server = Server("engine.max_num_seqs=8", "engine.max_num_batched_tokens=256",
                            "kv_cache.num_blocks=24", model=model)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def sampled(self, n, max_tokens=20, **kw):
        return pb.GenerateRequest(prompt="Whispers of vectors",
                                  sampling=pb.SamplingParams(temperature=0.8, n=n),
                                  stopping=pb.StoppingCriteria(max_tokens=max_tokens), **kw)

    def test_n_above_max_num_seqs_is_invalid_argument(self):
        with self.assertRaises(grpc.RpcError) as err:
            list(self.server.stub.Generate(self.sampled(9)))
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("n: 9", err.exception.details())
        self.assertIn("engine.max_num_seqs (8)", err.exception.details())

    def test_many_sampled_requests_under_a_small_pool_never_fail(self):
        rng = random.Random(5)
        reqs = [self.sampled(rng.randint(1, 8), rng.randint(1, 40)) for _ in range(60)]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            done = list(pool.map(lambda r: self.server.stub.Complete(r, timeout=120), reqs))
        for req, resp in zip(reqs, done):
            self.assertEqual(len(resp.completions), req.sampling.n)
            for c in resp.completions:
                self.assertIn(c.finish_reason, ("length", "stop"))
        self.assertTrue(self.server.wait_idle())
        self.assertEqual(self.server.metric("pagoda:kv_cache_usage_perc"), 0.0)

    def test_unparsable_protobuf_is_invalid_argument_and_logged_throttled(self):
        """Bytes that are not the method's request message: INVALID_ARGUMENT with a message (gRPC
        alone answers UNIMPLEMENTED, empty), libprotobuf's per-request ERROR line throttled."""
        ch = self.server.channel
        bad_utf8 = b"\x12\x02\xff\xfe"  # GenerateRequest.prompt (field 2) = bytes ff fe
        cases = [(m, b"\xff\xff\xff\x0f\x01")
                 for m in ("Complete", "Tokenize", "Detokenize", "GetModelInfo")]
        for method, body in cases + [("Complete", bad_utf8)]:
            with self.assertRaises(grpc.RpcError) as err:
                ch.unary_unary(f"/pagoda.v1.Generation/{method}")(body, timeout=10)
            self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, method)
            self.assertIn("not a valid protobuf encoding of /pagoda.v1.Generation/" + method,
                          err.exception.details())
        for _ in range(40):
            with self.assertRaises(grpc.RpcError) as err:
                list(ch.unary_stream("/pagoda.v1.Generation/Generate")(bad_utf8, timeout=10))
            self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as err:  # an unknown method stays UNIMPLEMENTED
            ch.unary_unary("/pagoda.v1.Generation/NoSuchMethod")(b"", timeout=10)
        self.assertEqual(err.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        log = self.server.output()
        self.assertNotIn("[libprotobuf ERROR", log)
        self.assertLessEqual(log.count("libprotobuf: String field"), 2, log[-3000:])
        resp = self.server.stub.Complete(greedy_request("Echoes", 4), timeout=30)
        self.assertEqual(len(resp.completions), 1)

    def test_oversized_request_ids_are_refused_and_other_streams_live_on(self):
        long_stream = self.server.stub.Generate(greedy_request("Echoes", 100))
        for size in (262144, 8192):
            for _ in range(2):  # the second is what a duplicate id used to break
                with self.assertRaises(grpc.RpcError) as err:
                    self.server.stub.Complete(greedy_request("hi", 2, request_id="x" * size))
                self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("request_id: %d bytes" % size, err.exception.details())
                self.assertLess(len(err.exception.details()), 200)
        tokens = [t for resp in long_stream for t in resp.token_ids]
        self.assertGreater(len(tokens), 0)

    def test_prompt_over_the_byte_bound_is_refused_untokenized(self):
        with self.assertRaises(grpc.RpcError) as err:
            self.server.stub.Complete(greedy_request("a" * (10 << 20), 2),
                                      timeout=60)
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("bytes cannot fit the context", err.exception.details())


class TruncatedModelTest(unittest.TestCase):
    """The served model file truncated in place: the next read of its mapping is a SIGBUS; the
    server says why in its log before it dies (it used to die silently)."""

    def test_truncated_model_file_is_reported(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "m.gguf")
            shutil.copy(os.path.join(ARGS.shared, "models/aidreams260K/aidreams260K-f32.gguf"),
                        model)
            server = Server(model=model)
            try:
                with open(model, "r+b") as f:
                    f.truncate(4096)
                with self.assertRaises(grpc.RpcError):
                    server.stub.Complete(greedy_request("Whispers", 4), timeout=30)
                server.proc.wait(timeout=30)
                self.assertEqual(server.proc.returncode, -signal.SIGBUS)
                self.assertIn("fatal: SIGBUS reading the memory-mapped model file",
                              server.output())
            finally:
                server.stop()


class ConfigTest(unittest.TestCase):
    def test_bad_config_fails_with_file_line_key(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("server:\n  listen_address: 127.0.0.1:0\nengine:\n  max_num_seqs: lots\n")
        proc = subprocess.run([ARGS.pagoda, "serve", "--config", f.name], capture_output=True,
                              text=True, timeout=30)
        os.unlink(f.name)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(f"{f.name}:4:", proc.stderr)
        self.assertIn("engine.max_num_seqs", proc.stderr)

    def test_print_config(self):
        proc = subprocess.run([ARGS.pagoda, "serve", "--print-config", "--set",
                               "engine.max_num_seqs=7"], capture_output=True, text=True,
                              timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("max_num_seqs: 7", proc.stdout)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--pagoda", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--shared", required=True)
    ARGS, rest = parser.parse_known_args()
    sys.exit(run_tests(rest))


def run_tests(rest):
    """Compiles the protos, runs this process's unittest cases; 0 only if some ran and all passed."""
    with tempfile.TemporaryDirectory() as out:
        compile_protos(out)
        prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    result = prog.result
    ran = result.testsRun
    failed = len(result.failures) + len(result.errors)
    print(f"{ran - failed} passed, {failed} failed")
    return 0 if result.wasSuccessful() and ran > 0 else 1


if __name__ == "__main__":
    main()
