#!/usr/bin/env python3
"""End to end without Neuron hardware: the artifacts builder's cpu-reference output served by
`pagoda serve` with `backend.type: neuron` over the fake libnrt's TorchScript mode
(lib/fake_nrt_torch/libnrt.so.1, tests/kernels/neuron/fake_nrt_torch.cc).

`python3 -m tools.neuron_build --target cpu-reference` writes the manifest, the weights in the
backend's layout and one TorchScript program per bucket; the server binds them exactly as it
would real NEFFs (tensor names, KV pools, slot mapping, block tables, padding sentinels, bucket
choice) and the fake runs each program's TorchScript on the bound tensors. The aidreams260K
reference prompts at temperature 0 must give the reference greedy tokens (which are the cpu
backend's): one request at a time, 8 concurrent streams (mixed prefill and decode steps over
several decode buckets), and with n-gram speculative decoding (decode programs of
tokens_per_seq 4 verify the drafts). The fake's counters show which programs ran real rows.

Usage: neuron_torchscript_e2e_test.py --pagoda BIN --repo DIR --shared DIR --fake-nrt-torch LIB
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import neuron_e2e_test as neuron
import server_e2e_test as base

ARGS = None
PLAN = """block_size: 16
num_blocks: 128
kv_dtype: f32
weight_dtype: f32
prefill:
  - {tokens: 16, ctx_blocks: 8}
  - {tokens: 64, ctx_blocks: 8}
decode:
  - {seqs: 1, ctx_blocks: 8}
  - {seqs: 2, ctx_blocks: 8}
  - {seqs: 4, ctx_blocks: 4}
  - {seqs: 8, ctx_blocks: 8}
  - {seqs: 1, tokens_per_seq: 4, ctx_blocks: 8}
  - {seqs: 4, tokens_per_seq: 4, ctx_blocks: 8}
"""


class TorchScriptServeTest(unittest.TestCase):
    """A neuron-backend server on cpu-reference artifacts gives the reference tokens."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.artifacts = os.path.join(cls.tmp, "artifacts")
        plan = os.path.join(cls.tmp, "plan.yaml")
        with open(plan, "w") as f:
            f.write(PLAN)
        subprocess.run([sys.executable, "-m", "tools.neuron_build", "--model", neuron.model_path(),
                        "--out", cls.artifacts, "--target", "cpu-reference", "--buckets", plan,
                        "-q"], cwd=ARGS.repo, check=True, timeout=600)
        with open(os.path.join(ARGS.shared, "models/aidreams260K/reference.json")) as f:
            cls.ref = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def write_config(self, name, speculative=""):
        return neuron.write_config(os.path.join(self.tmp, name), self.artifacts,
                                   library=ARGS.fake_nrt_torch,
                                   neuron_extra="  logical_nc_config: 1\n", extra=speculative)

    def start(self, config):
        self.counters = os.path.join(self.tmp, self.id().rsplit(".", 1)[1] + ".json")
        return base.Server(config=config, env=neuron.clean_env(FAKE_NRT_COUNTERS=self.counters,
                                                                FAKE_NRT_STRICT="1"))

    def stop(self, server):
        server.channel.close()
        rc = server.terminate(timeout=60)
        log = server.output()
        server.stop()
        self.assertEqual(rc, 0, log)
        with open(self.counters) as f:
            counters = json.load(f)
        self.assertEqual(counters["leaked_at_last_close"], 0, counters)
        return counters

    def concurrently(self, server, cases):
        def one(case):
            return base.stream_tokens(server.stub, neuron.reference_request(case))[0]

        with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
            return list(pool.map(one, cases))

    def test_reference_tokens_one_at_a_time_and_concurrently(self):
        server = self.start(self.write_config("serve.yaml"))
        try:
            info = server.stub.GetModelInfo(base.pb.GetModelInfoRequest())
            self.assertEqual(info.backend, "neuron")
            cases = self.ref["cases"]
            for case in cases:
                tokens, _, finish = base.stream_tokens(server.stub, neuron.reference_request(case))
                self.assertEqual(tokens, neuron.reference_tokens(self.ref, case), case["prompt"])
                self.assertEqual(finish, "length")
            many = (cases * 2)[:8]  # 8 streams: prefills join running decodes
            for case, tokens in zip(many, self.concurrently(server, many)):
                self.assertEqual(tokens, neuron.reference_tokens(self.ref, case), case["prompt"])
        finally:
            counters = self.stop(server)
        programs = counters["programs"]
        for pid in ("prefill_t16_c8", "prefill_t64_c8", "decode_b1_t1_c8", "decode_b8_t1_c8"):
            self.assertGreater(programs[pid]["real_executes"], 0, (pid, programs))
        self.assertGreaterEqual(programs["decode_b8_t1_c8"]["max_real_rows"], 5, programs)

    def test_speculative_verification_uses_multi_token_programs(self):
        spec = ("speculative:\n  method: ngram\n  num_tokens: 3\n  ngram_min: 1\n"
                "  disable_by_batch_size: 0\n")
        server = self.start(self.write_config("spec.yaml", spec))
        try:
            cases = self.ref["cases"]
            for case in cases[:3]:
                tokens, _, _ = base.stream_tokens(server.stub, neuron.reference_request(case, 60))
                self.assertEqual(tokens, neuron.reference_tokens(self.ref, case, 60),
                                 case["prompt"])
            for case, tokens in zip(cases, self.concurrently(server, cases)):
                self.assertEqual(tokens, neuron.reference_tokens(self.ref, case), case["prompt"])
        finally:
            counters = self.stop(server)
        t4 = [p for pid, p in counters["programs"].items() if "_t4_" in pid]
        self.assertTrue(any(p["real_executes"] > 0 for p in t4), counters["programs"])


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    for flag in ("--pagoda", "--repo", "--shared", "--fake-nrt-torch"):
        parser.add_argument(flag, required=True)
    ARGS, rest = parser.parse_known_args()
    base.ARGS = neuron.ARGS = ARGS
    sys.exit(base.run_tests(rest))


if __name__ == "__main__":
    main()
