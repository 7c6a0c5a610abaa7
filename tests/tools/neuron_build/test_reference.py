"""cpu-reference numerics: teacher-forced logits of the traced programs against the shared
references (aidreams260K: llama2.c's run.c in fp32; synth-gqa: llama.cpp with an F32 KV cache,
suggested tolerance 1e-4 for F32), both kernels' paths (prefill programs = flash paged
attention, decode programs = attention_block_tkg, one and several tokens per sequence, several
sequences per execution), and greedy tokens against the references and `pagoda generate`."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import (AIDREAMS, REPO, aidreams_reference, build_artifacts, pagoda, synth,
                      synth_reference)
from tools.neuron_build.run import Runner

F32_TOL = 1e-4


def cases(model):
    """[(tokens, reference logits [n][vocab], prompt, greedy tokens)] of a shared model:
    logits[i] follow tokens[i] (aidreams' reference runs four positions past the prompt)."""
    if model == "aidreams":
        return [(c["prompt_tokens"] + c["greedy_tokens"], c["logits"], c["prompt_tokens"],
                 c["greedy_tokens"]) for c in aidreams_reference()["cases"]]
    return [(c["prompt_tokens"], c["logits"], c["prompt_tokens"], c["greedy"]["tokens"])
            for c in synth_reference(model)["cases"]]


def model_path(model):
    return AIDREAMS if model == "aidreams" else synth(model)


@pytest.fixture(scope="module", params=["aidreams", "llama-gqa-f32", "qwen2-bias-f32"])
def built(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    build_artifacts(model_path(request.param), out)
    return request.param, Runner(str(out))


def test_decode_programs_teacher_forced(built):
    """One token per execution (decode_b1_t1) at every position."""
    model, r = built
    worst = 0.0
    for tokens, ref, _, _ in cases(model):
        blocks = r.blocks_for(len(tokens) + 4)
        for i, ref_row in enumerate(ref):
            got = r.decode([([tokens[i]], i, blocks)])[0][0].numpy()
            worst = max(worst, float(np.abs(got - np.array(ref_row)).max()))
    print(f"{model}: decode max |dlogit| {worst:.3g}")
    assert worst <= F32_TOL


def test_prefill_programs_last_token(built):
    """A whole prompt (pieces of the largest prefill program) and a chunked continuation."""
    model, r = built
    worst = 0.0
    for tokens, ref, _, _ in cases(model):
        n = len(ref)
        blocks = r.blocks_for(n)
        got = r.prefill(tokens[:n], blocks).numpy()
        worst = max(worst, float(np.abs(got - np.array(ref[n - 1])).max()))
        if n > 2:  # chunked: the first half cached, then the rest attends to it
            blocks = r.blocks_for(n, first_block=len(blocks))
            r.prefill(tokens[:n // 2], blocks)
            got = r.prefill(tokens[:n], blocks, start=n // 2).numpy()
            worst = max(worst, float(np.abs(got - np.array(ref[n - 1])).max()))
    print(f"{model}: prefill max |dlogit| {worst:.3g}")
    assert worst <= F32_TOL


def test_multi_token_and_batched_decode(built):
    """Speculative-verification shape: after a prefill, rows of 1..4 new tokens (a
    tokens_per_seq 4 program, padding inside rows) for several sequences in one execution give
    every token's reference logits."""
    model, r = built
    all_cases = [c for c in cases(model) if len(c[1]) >= 6]
    rows, expect, next_block = [], [], 0
    for k, (tokens, ref, _, _) in enumerate(all_cases[:4]):
        blocks = r.blocks_for(len(ref), first_block=next_block)
        next_block += len(blocks)
        q = 1 + k % 4
        start = len(ref) - q
        r.prefill(tokens[:start], blocks)
        rows.append((tokens[start:len(ref)], start, blocks))
        expect.append(np.array(ref[start:]))
    out = r.decode(rows)
    worst = max(float(np.abs(o.numpy() - e).max()) for o, e in zip(out, expect))
    print(f"{model}: multi-token decode max |dlogit| {worst:.3g}")
    assert worst <= F32_TOL
    used = [pid for pid, n in r.executions.items() if n and "_t4_" in pid]
    assert used, r.executions


def test_greedy_tokens_equal_the_reference(built):
    model, r = built
    for _, _, prompt, greedy in cases(model):
        greedy = greedy[:24]
        assert r.generate(prompt, len(greedy)) == greedy, (model, prompt)


def pagoda_greedy(model, prompts, max_tokens, tmp_path, kv_dtype="f32"):
    """`pagoda generate --json` greedy tokens (the CPU backend) for token-id prompts."""
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps({"prompt_token_ids": p, "max_tokens": max_tokens,
                                           "temperature": 0, "ignore_eos": True})
                               for p in prompts) + "\n")
    done = subprocess.run([pagoda(), "generate", "--model", model, "--prompts-file", str(path),
                           "--kv-dtype", kv_dtype, "--json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [res["token_ids"] for res in results if "token_ids" in res]


@pytest.mark.parametrize("model", ["aidreams", "llama-gqa-f32", "llama-gqa-f16",
                                   "llama-gqa-q8_0", "qwen2-bias-f32"])
def test_greedy_tokens_equal_pagoda_generate(model, tmp_path):
    out = tmp_path / "a"
    build_artifacts(model_path(model), out)
    r = Runner(str(out))
    prompts = [c[2] for c in cases(model)][:4]
    expected = pagoda_greedy(model_path(model), prompts, 16, tmp_path)
    assert len(expected) == len(prompts)
    for p, e in zip(prompts, expected):
        got = r.generate(p, len(e))
        if model.endswith("q8_0") and got != e:
            # Pagoda's CPU backend multiplies Q8_0 weights with Q8_0-quantized activations;
            # the cpu-reference dequantizes the weights (as a device build does). A split is
            # only allowed at a near-tie: Pagoda's token is within the file's suggested
            # tolerance (0.6) of the reference's best logit there.
            k = next(i for i, (a, b) in enumerate(zip(got, e)) if a != b)
            seq = list(p) + e[:k]
            logits = r.prefill(seq, r.blocks_for(len(seq))).numpy()
            assert logits.max() - logits[e[k]] < 0.6, (model, p, k)
            continue
        assert got == e, (model, p)


def test_runner_cli_prints_the_reference_tokens(aidreams_artifacts):
    c = aidreams_reference()["cases"][1]
    done = subprocess.run([sys.executable, "-m", "tools.neuron_build.run", "--artifacts",
                           str(aidreams_artifacts), "--prompt-ids",
                           ",".join(map(str, c["prompt_tokens"])), "--max-tokens", "20"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"token_ids": c["greedy_tokens"][:20]}


def test_cli_help_and_progress(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tools.neuron_build", "--help"], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "--target" in done.stdout and "cpu-reference" in done.stdout
    done = subprocess.run([sys.executable, "-m", "tools.neuron_build", "--model", AIDREAMS,
                           "--out", str(tmp_path / "o"), "--target", "trn2"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr  # hidden size 64: not a device shape
    assert "hidden size 64 is not a multiple of 128" in done.stderr
    done = subprocess.run([sys.executable, "-m", "tools.neuron_build", "--model",
                           synth("llama-gqa-f32"), "--out", str(tmp_path / "n"), "--target",
                           "trn2"], cwd=REPO, capture_output=True, text=True, timeout=300)
    # Plans, exports, then needs AWS's toolchain, which is not installed here: exit 3.
    assert done.returncode == 3, done.stderr
    assert "[neuron_build" in done.stderr and "needs AWS's Neuron toolchain" in done.stderr
