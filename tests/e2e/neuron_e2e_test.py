#!/usr/bin/env python3
"""End-to-end tests of `pagoda serve` with `backend.type: neuron`, run over the fake libnrt
(tests/kernels/neuron) because there is no Neuron device here.

This file covers:
- greedy parity with the aidreams260K reference (which is what the cpu backend gives),
  including concurrent requests that span several buckets;
- an injected request-level execute failure, which fails only that step's requests (over
  gRPC, and over HTTP as OpenAI's error body with code 500; see the known gap there);
- a fatal status, after which health reports NOT_SERVING;
- zero runtime objects leaked at shutdown;
- every start-up failure of the real binary, with its exact stderr message and exit code.

The fake's counters come from its FAKE_NRT_COUNTERS file. The fake writes that file at
nrt_close and again when the process exits. The artifacts (manifest.json plus the fake NEFFs)
are written by tests/kernels/neuron's `fake_nrt_artifacts`. Servers listen on free loopback ports.

Usage: neuron_e2e_test.py --pagoda BIN --repo DIR --shared DIR --fake-nrt LIB
       --fake-nrt-stub LIB --artifacts-tool BIN
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import server_e2e_test as base

ARGS = None

# id:phase:size:ctx_blocks (block_size 16: 8 blocks = the model's whole 128-token context).
BUCKETS = ["decode_b1:decode:1:8", "decode_b2:decode:2:8", "decode_b2_c4:decode:2:4",
           "decode_b4:decode:4:8", "decode_b8:decode:8:8", "decode_b16:decode:16:8",
           "prefill_t16:prefill:16:8", "prefill_t64:prefill:64:8"]
# neuron.buckets.enable leaves decode_b16 out: it must never be loaded.
ENABLED = [b.split(":")[0] for b in BUCKETS if not b.startswith("decode_b16:")]
WARMUP_EXECUTES = len(ENABLED)  # neuron.warmup runs every enabled program once

LIBRARY_HINT = ("  The Neuron backend needs an Inf2/Trn1/Trn2 instance with the aws-neuronx-dkms "
                "driver and the\n  aws-neuronx-runtime-lib package. Set neuron.runtime_library to "
                "its path, or run with `backend.type: cpu`.")


def clean_env(drop=(), **extra):
    """Our environment without NEURON_* / FAKE_NRT_* (and `drop`), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NEURON_", "FAKE_NRT_")) and k not in drop}
    env.update(extra)
    return env


def write_artifacts(out_dir, *flags):
    os.makedirs(out_dir)
    cmd = [ARGS.artifacts_tool, "--model", model_path(), "--out", out_dir, "--num-blocks", "128"]
    for b in BUCKETS:
        cmd += ["--bucket", b]
    subprocess.run(cmd + list(flags), check=True, timeout=60)
    return out_dir


def model_path():
    return os.path.join(ARGS.shared, "models/aidreams260K/aidreams260K-f32.gguf")


def write_config(path, artifacts_dir, library=None, backend="neuron", neuron_extra="", extra=""):
    """A serve config for the aidreams model with the given neuron section (none for the cpu
    backend, which rejects neuron.* keys) and `extra` top-level YAML."""
    library = ARGS.fake_nrt if library is None else library
    neuron = f"""neuron:
  runtime_library: "{library}"
  artifacts_dir: "{artifacts_dir}"
{neuron_extra}""" if backend == "neuron" else ""
    with open(path, "w") as f:
        f.write(f"""server:
  listen_address: 127.0.0.1:0
  metrics_address: 127.0.0.1:0
model:
  path: "{model_path()}"
engine:
  max_num_seqs: 8
backend:
  type: {backend}
{neuron}{extra}""")
    return path


def reference_tokens(ref, case, max_tokens=None):
    """The reference greedy tokens of `case` that fit the context (the first max_tokens)."""
    tokens = case["greedy_tokens"][:ref["config"]["seq_len"] - len(case["prompt_tokens"])]
    return tokens if max_tokens is None else tokens[:max_tokens]


def reference_request(case, max_tokens=None):
    """The greedy request of a reference case (BOS, id 1, ends it as in llama2.c)."""
    n = len(case["greedy_tokens"]) if max_tokens is None else max_tokens
    return base.pb.GenerateRequest(
        prompt_token_ids=base.pb.TokenIds(ids=case["prompt_tokens"]),
        sampling=base.pb.SamplingParams(temperature=0.0),
        stopping=base.pb.StoppingCriteria(max_tokens=n, stop_token_ids=[1]))


def enable_list(ids):
    return "  buckets:\n    enable: [" + ", ".join(ids) + "]\n"


def http_status(server, path):
    url = f"http://127.0.0.1:{server.metrics_port}{path}"
    try:
        return urllib.request.urlopen(url, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


def grpc_health(server):
    stub = base.health_grpc.HealthStub(server.channel)
    return stub.Check(base.health_pb.HealthCheckRequest(service=""), timeout=10).status


class NeuronServeTest(unittest.TestCase):
    """A running neuron-backend server: parity, buckets, failures, health and leaks."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.artifacts = write_artifacts(os.path.join(cls.tmp, "artifacts"))
        cls.config = write_config(os.path.join(cls.tmp, "neuron.yaml"), cls.artifacts,
                                  neuron_extra=enable_list(ENABLED))
        with open(os.path.join(ARGS.shared, "models/aidreams260K/reference.json")) as f:
            cls.ref = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def start(self, *sets, **env):
        """A neuron server; its fake runtime is strict and writes its counters to a file."""
        self.counters_path = os.path.join(self.tmp, self.id().rsplit(".", 1)[1] + ".json")
        env = clean_env(FAKE_NRT_COUNTERS=self.counters_path, FAKE_NRT_STRICT="1", **env)
        return base.Server(*sets, config=self.config, env=env)

    def shutdown(self, server):
        """SIGTERM, then the exit code, the log and the fake's final counters."""
        server.channel.close()
        rc = server.terminate(timeout=60)
        log = server.output()
        server.stop()
        with open(self.counters_path) as f:
            return rc, log, json.load(f)

    def assert_clean_shutdown(self, rc, log, counters):
        self.assertEqual(rc, 0, log)
        self.assertIn("shut down cleanly", log)
        self.assertEqual(counters["written_at"], "exit")
        self.assertEqual((counters["inits"], counters["closes"]), (1, 1))
        self.assertEqual(counters["leaked_at_last_close"], 0, counters)
        for kind in ("tensors", "sets", "models"):
            self.assertEqual(counters[kind + "_live"], 0, (kind, counters))
        self.assertGreater(counters["tensors_allocated"], 0)
        self.assertEqual(sorted(counters["programs"]), sorted(ENABLED))

    def expected(self, case, max_tokens=None):
        return reference_tokens(self.ref, case, max_tokens)

    def request(self, case, max_tokens=None):
        return reference_request(case, max_tokens)

    def run_concurrently(self, server, cases, max_tokens=None):
        """Streams every case at once; returns (tokens, None) or (None, RpcError) per case."""
        def one(case):
            try:
                return base.stream_tokens(server.stub, self.request(case, max_tokens))[0], None
            except base.grpc.RpcError as e:
                return None, e

        with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
            return list(pool.map(one, cases))

    def test_greedy_tokens_match_the_reference_across_buckets(self):
        server = self.start()
        try:
            info = server.stub.GetModelInfo(base.pb.GetModelInfoRequest())
            self.assertEqual(info.backend, "neuron")
            self.assertEqual(grpc_health(server), base.health_pb.HealthCheckResponse.SERVING)
            self.assertEqual((http_status(server, "/health"), http_status(server, "/ready")),
                             (200, 200))
            cases = self.ref["cases"]
            for case in cases:  # one at a time: decode_b1, prefill_t16 and prefill_t64
                tokens, _, finish = base.stream_tokens(server.stub, self.request(case))
                self.assertEqual(tokens, self.expected(case), case["prompt"])
                self.assertEqual(finish, "length")
            # n = 2 samples fork after the prompt: the shared partial block is copied on write.
            req = self.request(cases[3], 20)
            req.sampling.n = 2
            resp = server.stub.Complete(req)
            self.assertEqual([list(c.token_ids) for c in resp.completions],
                             [self.expected(cases[3], 20)] * 2)
            many = cases * 2  # 12 streams over 8 sequence slots: groups of 8 shrink to 1
            for case, (tokens, error) in zip(many, self.run_concurrently(server, many)):
                self.assertIsNone(error)
                self.assertEqual(tokens, self.expected(case), case["prompt"])
        finally:
            rc, log, counters = self.shutdown(server)
        self.assert_clean_shutdown(rc, log, counters)
        self.assertGreater(counters["calls"].get("nrt_tensor_copy", 0), 0, counters["calls"])
        programs = counters["programs"]
        for p in ENABLED:
            self.assertEqual(programs[p]["loads"], 1, p)
        used = {p for p, c in programs.items() if c["real_executes"] > 0}
        self.assertTrue({"decode_b1", "prefill_t16", "prefill_t64"} <= used, programs)
        batched = {p for p in used if p.startswith("decode") and programs[p]["max_real_rows"] > 1}
        self.assertGreaterEqual(len(batched), 2, programs)  # e.g. decode_b8 and decode_b4
        self.assertGreaterEqual(max(programs[p]["max_real_rows"] for p in batched), 5, programs)

    def test_injected_execute_failure_fails_only_that_steps_requests(self):
        # The first execution after warm-up returns NRT_EXEC_COMPLETED_WITH_NUM_ERR. Its step holds
        # at most 16 prompt tokens, fewer than the six prompts together (63).
        fail = f"nrt_execute:1003:{WARMUP_EXECUTES + 1}"
        server = self.start("engine.max_num_batched_tokens=16", FAKE_NRT_FAIL=fail)
        try:
            cases = self.ref["cases"]
            results = self.run_concurrently(server, cases, max_tokens=8)
            failed = [e for _, e in results if e is not None]
            self.assertGreaterEqual(len(failed), 1)
            self.assertLess(len(failed), len(cases))
            for e in failed:
                self.assertEqual(e.code(), base.grpc.StatusCode.INTERNAL)
                self.assertIn("NRT_EXEC_COMPLETED_WITH_NUM_ERR (1003)", e.details())
            for case, (tokens, error) in zip(cases, results):
                if error is None:
                    self.assertEqual(tokens, self.expected(case, 8), case["prompt"])
            self.assertEqual(grpc_health(server), base.health_pb.HealthCheckResponse.SERVING)
            for case, (tokens, error) in zip(cases, self.run_concurrently(server, cases, 8)):
                self.assertIsNone(error)  # the next requests succeed
                self.assertEqual(tokens, self.expected(case, 8), case["prompt"])
            self.assertTrue(server.wait_idle())
            self.assertEqual(server.metric("pagoda:request_success_total",
                                           'finished_reason="error"'), len(failed))
            self.assertEqual(http_status(server, "/health"), 200)
        finally:
            rc, log, counters = self.shutdown(server)
        self.assert_clean_shutdown(rc, log, counters)

    def test_failed_step_answers_an_openai_500_body_over_http(self):
        """The OpenAI API's backend failure: the first execution after warm-up fails
        (request-level status 1003), so that request's step fails and /v1/completions answers
        HTTP 500 with OpenAI's error body (code 500 / server_error); the next request is served
        normally."""
        server = self.start(FAKE_NRT_FAIL=f"nrt_execute:1003:{WARMUP_EXECUTES + 1}")
        try:
            case = self.ref["cases"][1]
            body = {"prompt": case["prompt_tokens"], "max_tokens": 4, "temperature": 0,
                    "stop_token_ids": [1], "logprobs": 0, "return_tokens_as_token_ids": True}
            status, resp = server.json("/v1/completions", body)
            self.assertEqual(status, 500, resp)
            self.assertEqual(sorted(resp), ["error"])
            err = resp["error"]
            self.assertEqual(sorted(err), ["code", "message", "param", "type"])
            self.assertEqual((err["type"], err["code"], err["param"]), ("server_error", 500, None))
            self.assertIn("NRT_EXEC_COMPLETED_WITH_NUM_ERR (1003)", err["message"])
            status, resp = server.json("/v1/completions", body)
            self.assertEqual(status, 200, resp)
            tokens = [int(t[len("token_id:"):]) for t in resp["choices"][0]["logprobs"]["tokens"]]
            self.assertEqual(tokens, self.expected(case, 4))
            self.assertTrue(server.wait_idle())
            self.assertEqual(http_status(server, "/health"), 200)
        finally:
            rc, log, counters = self.shutdown(server)
        self.assert_clean_shutdown(rc, log, counters)

    def test_fatal_status_turns_health_not_serving(self):
        server = self.start(FAKE_NRT_FAIL=f"nrt_execute:5:{WARMUP_EXECUTES + 1}")  # NRT_TIMEOUT
        not_serving = base.health_pb.HealthCheckResponse.NOT_SERVING
        try:
            self.assertEqual(grpc_health(server), base.health_pb.HealthCheckResponse.SERVING)
            case = self.ref["cases"][1]
            with self.assertRaises(base.grpc.RpcError) as cm:
                server.stub.Complete(self.request(case, 4))
            self.assertEqual(cm.exception.code(), base.grpc.StatusCode.INTERNAL)
            self.assertIn("NRT_TIMEOUT (5)", cm.exception.details())
            deadline = time.time() + 10
            while grpc_health(server) != not_serving and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(grpc_health(server), not_serving)
            self.assertEqual((http_status(server, "/health"), http_status(server, "/ready")),
                             (503, 503))
            with self.assertRaises(base.grpc.RpcError) as cm:
                server.stub.Complete(self.request(case, 4))
            self.assertEqual(cm.exception.code(), base.grpc.StatusCode.INTERNAL)
            self.assertIn("unhealthy", cm.exception.details())
            health = subprocess.run([ARGS.pagoda, "health", "--server",
                                     f"127.0.0.1:{server.port}"], capture_output=True, text=True,
                                    timeout=30)
            self.assertEqual(health.returncode, 1, health.stdout + health.stderr)
            self.assertIn("NOT_SERVING", health.stdout)
        finally:
            rc, log, counters = self.shutdown(server)
        self.assertIn("health is now NOT_SERVING", log)
        self.assert_clean_shutdown(rc, log, counters)

    def test_cpu_backend_never_loads_the_runtime(self):
        marker = os.path.join(self.tmp, "loaded-marker")
        config = write_config(os.path.join(self.tmp, "cpu.yaml"), self.artifacts, backend="cpu")
        # The fake is on the loader path, so a stray dlopen("libnrt.so.1") would load it.
        fake_dir = os.path.dirname(ARGS.fake_nrt)
        server = base.Server(config=config,
                             env=clean_env(FAKE_NRT_MARKER=marker, LD_LIBRARY_PATH=fake_dir))
        try:
            info = server.stub.GetModelInfo(base.pb.GetModelInfoRequest())
            self.assertEqual(info.backend, "cpu")
            case = self.ref["cases"][2]
            tokens, _, _ = base.stream_tokens(server.stub, self.request(case, 8))
            self.assertEqual(tokens, self.expected(case, 8))
        finally:
            server.stop()
        self.assertFalse(os.path.exists(marker))


class NeuronStartupFailureTest(unittest.TestCase):
    """`pagoda serve --config X` fails with the exact message on stderr and its exit code:
    3 runtime unavailable, 4 artifacts mismatch, 2 config / environment conflict."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.good = write_artifacts(os.path.join(cls.tmp, "good"))
        cls.wrong_shape = write_artifacts(os.path.join(cls.tmp, "wrong_shape"),
                                          "--wrong-shape", "decode_b2")
        cls.header_lnc1 = write_artifacts(os.path.join(cls.tmp, "header_lnc1"),
                                          "--header-lnc", "1")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def serve(self, artifacts=None, library=None, neuron_extra="", drop=(), **env):
        """Runs the server on a fresh config; returns (exit code, stdout, stderr, config)."""
        config = write_config(os.path.join(self.tmp, self.id().rsplit(".", 1)[1] + ".yaml"),
                              artifacts or self.good, library=library,
                              neuron_extra=neuron_extra)
        proc = subprocess.run([ARGS.pagoda, "serve", "--config", config,
                               "--set", "server.http_address=127.0.0.1:0"], capture_output=True,
                              text=True, timeout=60, env=clean_env(drop=drop, **env))
        return proc.returncode, proc.stdout, proc.stderr, config

    def assert_fails(self, result, code, message):
        rc, stdout, stderr, _ = result
        self.assertEqual(stderr, "error: " + message + "\n", stdout)
        self.assertEqual(rc, code, stderr)

    def test_library_missing_at_the_configured_path(self):
        self.assert_fails(
            self.serve(library="/nonexistent/libnrt.so.1"), 3,
            "neuron backend: cannot load the Neuron runtime library (libnrt.so.1).\n"
            "  tried: /nonexistent/libnrt.so.1: /nonexistent/libnrt.so.1: cannot open shared "
            "object file: No such file or directory\n" + LIBRARY_HINT)

    def test_library_missing_from_the_default_search(self):
        default = "/opt/aws/neuron/lib/libnrt.so.1"
        self.assertFalse(os.path.exists(default), "this host has a real Neuron runtime")
        self.assert_fails(
            self.serve(library="", drop=("LD_LIBRARY_PATH",)), 3,
            "neuron backend: cannot load the Neuron runtime library (libnrt.so.1).\n"
            "  tried: libnrt.so.1: libnrt.so.1: cannot open shared object file: No such file or "
            "directory\n"
            f"         {default}: {default}: cannot open shared object file: No such file or "
            "directory\n" + LIBRARY_HINT)

    def test_symbol_missing(self):
        self.assert_fails(
            self.serve(library=ARGS.fake_nrt_stub), 3,
            f"neuron backend: {ARGS.fake_nrt_stub} lacks required symbol 'nrt_execute' "
            "(libnrt 2.99.0).")

    def test_init_failure_has_diagnostics(self):
        rc, _, stderr, _ = self.serve(FAKE_NRT_FAIL="nrt_init:1")
        self.assertEqual(rc, 3, stderr)
        self.assertTrue(stderr.startswith(
            "error: neuron backend: nrt_init failed: NRT_FAILURE (1).\n  /dev/neuron*: "), stderr)
        self.assertIn("\n  NEURON_RT_VISIBLE_CORES=(unset)\n", stderr)
        self.assertIn("neuron-ls", stderr)

    def test_manifest_mismatch_prints_a_diff(self):
        d = self.wrong_shape
        self.assert_fails(
            self.serve(artifacts=d), 4,
            f"neuron backend: program 'decode_b2' ({d}/decode_b2.neff) does not match the "
            "manifest (- manifest, + runtime):\n"
            "  - input input_ids i32[2] (8 bytes)\n  + input input_ids i32[3] (12 bytes)\n")

    def test_lnc_mismatch_with_the_manifest(self):
        self.assert_fails(
            self.serve(neuron_extra="  logical_nc_config: 1\n"), 4,
            f"neuron backend: LNC mismatch: neuron.logical_nc_config is 1 but the manifest "
            f"{self.good}/manifest.json was compiled for lnc 2 (recompile with -lnc 1, or set "
            "neuron.logical_nc_config: 2)")

    def test_lnc_mismatch_with_a_neff_header(self):
        d = self.header_lnc1
        self.assert_fails(
            self.serve(artifacts=d), 4,
            f"neuron backend: LNC mismatch: neuron.logical_nc_config is 2 but {d}/decode_b1.neff "
            "was compiled for lnc 1")

    def test_environment_conflict_names_both_values(self):
        self.assert_fails(
            self.serve(neuron_extra='  visible_cores: "0"\n', NEURON_RT_VISIBLE_CORES="1"), 2,
            'neuron backend: environment NEURON_RT_VISIBLE_CORES="1" conflicts with '
            'neuron.visible_cores "0" (unset the variable or make the two equal)')

    def test_unknown_bucket_id(self):
        ids = ", ".join(b.split(":")[0] for b in BUCKETS)
        self.assert_fails(
            self.serve(neuron_extra=enable_list(["decode_b1", "prefill_t99"])), 2,
            "neuron backend: neuron.buckets.enable: no program 'prefill_t99' in "
            f"{self.good}/manifest.json (it has: {ids})")

    def test_bad_buckets_value_names_file_line_and_key(self):
        extra = '  buckets:\n    enable: "decode_b1,prefill_t16"\n'
        rc, stdout, stderr, config = self.serve(neuron_extra=extra)
        self.assertEqual(
            stderr, f"error: {config}:14:5: neuron.buckets.enable: expected a list of program "
            'ids, e.g. ["decode_b8", "prefill_t512"], got "decode_b1,prefill_t16"\n', stdout)
        self.assertEqual(rc, 2)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    for flag in ("--pagoda", "--repo", "--shared", "--fake-nrt", "--fake-nrt-stub",
                 "--artifacts-tool"):
        parser.add_argument(flag, required=True)
    ARGS, rest = parser.parse_known_args()
    base.ARGS = ARGS
    sys.exit(base.run_tests(rest))


if __name__ == "__main__":
    main()
