"""Bucket planning against the seed kernels' constraints (tools/neuron_build/buckets.py)."""
import pytest

from conftest import AIDREAMS, synth
from tools.neuron_build import buckets
from tools.neuron_build.model_source import ModelSpec, load_model


def spec(**kw):
    base = dict(architecture="llama", n_embd=256, n_layers=2, n_heads=8, n_kv_heads=2,
                head_dim=32, n_ff=512, vocab_size=512, context_length=256, rope_dim=32)
    base.update(kw)
    return ModelSpec(**base)


def write_plan(tmp_path, text):
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return str(path)


def test_default_plan_respects_every_constraint():
    s, _ = load_model(synth("llama-gqa-f32"))
    plan = buckets.default_plan(s, "cpu-reference")
    buckets.check(s, plan, "cpu-reference")
    assert plan.prefill() and plan.decode()
    for b in plan.decode():
        assert b.seqs * b.tokens_per_seq * s.n_heads <= buckets.TKG_MAX_ROWS
        assert 1 <= b.tokens_per_seq <= 8
    # 8 query heads: batch 8 x 4 tokens (256 rows) is dropped, 4 x 4 (128) kept.
    ids = {b.id for b in plan.buckets}
    assert "decode_b4_t4_c16" in ids and "decode_b8_t4_c16" not in ids
    assert any(b.tokens_per_seq > 1 for b in plan.decode())  # speculative verification


def test_tkg_row_limit_rejects_a_bucket(tmp_path):
    s, _ = load_model(AIDREAMS)  # 4 query heads
    path = write_plan(tmp_path, "prefill: [{tokens: 16, ctx_blocks: 8}]\n"
                                "decode: [{seqs: 8, tokens_per_seq: 8, ctx_blocks: 8}]\n")
    with pytest.raises(buckets.PlanError) as e:
        buckets.load_plan(s, "cpu-reference", path)
    assert "B x S_tkg x q_heads = 8 x 8 x 4 = 256 > 128" in str(e.value)


def test_tokens_per_seq_limit_and_missing_phase(tmp_path):
    s = spec()
    path = write_plan(tmp_path, "decode: [{seqs: 1, tokens_per_seq: 9, ctx_blocks: 4}]\n")
    with pytest.raises(buckets.PlanError) as e:
        buckets.load_plan(s, "cpu-reference", path)
    assert "tokens_per_seq 9 outside 1..8" in str(e.value)
    assert "at least one prefill and one decode" in str(e.value)


def test_neuron_tiling_rules(tmp_path):
    s = spec(context_length=4096)
    path = write_plan(tmp_path, "block_size: 32\nnum_blocks: 512\n"
                                "prefill: [{tokens: 100, ctx_blocks: 16}, {tokens: 128, "
                                "ctx_blocks: 70}, {tokens: 640, ctx_blocks: 64}]\n"
                                "decode: [{seqs: 4, ctx_blocks: 64}]\n")
    with pytest.raises(buckets.PlanError) as e:
        buckets.load_plan(s, "trn2", path)
    msg = str(e.value)
    assert "seq_q 100 is not a multiple of 128" in msg
    assert "prefill_t128_c70: flash_paged_attention: context 2240 tokens" in msg
    assert "seq_q 640 > 512 must be a multiple of 512" in msg
    # The same plan is fine for cpu-reference except nothing: no device tiling there.
    buckets.load_plan(s, "cpu-reference", path)


def test_large_tile_choice():
    assert buckets.large_tile(4096, 32) == 2048
    assert buckets.large_tile(1536, 16) == 512
    assert buckets.large_tile(1000, 8) is None
    # ratio 512/256 = 2 < 128 needs block_size % 64 == 0: 256 passes.
    assert buckets.large_tile(512, 256) == 512


def test_model_constraints():
    plan = buckets.Plan(16, 64, "f32", "f32", [buckets.Bucket("prefill", 4, tokens=16),
                                               buckets.Bucket("decode", 4)])
    with pytest.raises(buckets.PlanError) as e:
        buckets.check(spec(head_dim=192, rope_dim=192), plan, "cpu-reference")
    assert "head_dim 192" in str(e.value)
    with pytest.raises(buckets.PlanError) as e:
        buckets.check(spec(n_embd=200), plan, "inf2")
    assert "hidden size 200 is not a multiple of 128" in str(e.value)


def test_bad_plan_files(tmp_path):
    s = spec()
    for text, needle in (("colour: red\n", "unknown keys"),
                         ("prefill: [{tokens: 16}]\n", "needs ctx_blocks"),
                         ("decode: [{seqs: 1.5, ctx_blocks: 2}]\n", "must be integers"),
                         ("block_size: 24\n", "block_size 24")):
        with pytest.raises(buckets.PlanError) as e:
            buckets.load_plan(s, "cpu-reference", write_plan(tmp_path, text))
        assert needle in str(e.value)


def test_cli_rejects_a_plan_with_exit_code_2(tmp_path):
    import subprocess
    import sys
    from conftest import REPO

    path = write_plan(tmp_path, "decode: [{seqs: 64, ctx_blocks: 8}]\n"
                                "prefill: [{tokens: 16, ctx_blocks: 8}]\n")
    done = subprocess.run([sys.executable, "-m", "tools.neuron_build", "--model", AIDREAMS,
                           "--out", str(tmp_path / "out"), "--target", "cpu-reference",
                           "--buckets", path], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2
    assert "bucket plan rejected" in done.stderr and "decode_b64_t1_c8" in done.stderr
