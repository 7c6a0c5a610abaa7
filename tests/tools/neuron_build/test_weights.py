"""Weight export: the GGUF reader (F32 / F16 / Q8_0 dequantized), HF directories (safetensors +
config.json) and the backend layout (tools/neuron_build/weights.py)."""
import json
import os
import struct
import subprocess

import numpy as np

from conftest import pagoda, synth
from tools.neuron_build import gguf
from tools.neuron_build import weights as wt
from tools.neuron_build.model_source import load_model


def test_gguf_f16_and_q8_0_dequantize_like_ggml():
    f32 = gguf.GgufFile(synth("llama-gqa-f32"))
    f16 = gguf.GgufFile(synth("llama-gqa-f16"))
    q8 = gguf.GgufFile(synth("llama-gqa-q8_0"))
    name = "blk.0.attn_q.weight"
    assert f16.tensors[name].type == gguf.F16 and q8.tensors[name].type == gguf.Q8_0
    ref = f32.tensor(name)
    np.testing.assert_array_equal(f16.tensor(name), ref.astype(np.float16).astype(np.float32))
    # Q8_0 by hand: block 0 of row 0 is an f16 scale then 32 int8.
    raw = bytes(q8.tensors[name].raw[:34])
    d = np.frombuffer(raw[:2], dtype="<f2").astype(np.float32)[0]
    q = np.frombuffer(raw[2:], dtype="i1").astype(np.float32)
    np.testing.assert_array_equal(q8.tensor(name)[0, :32], d * q)
    err = np.abs(q8.tensor(name) - ref).max()
    assert 0 < err < np.abs(ref).max() / 100  # quantized: close, not equal


def test_gguf_model_spec_matches_the_readme():
    s, w = load_model(synth("qwen2-bias-f32"))
    assert (s.architecture, s.n_embd, s.n_layers, s.n_heads, s.n_kv_heads, s.head_dim) == \
        ("qwen2", 256, 4, 8, 2, 32)
    assert s.rope_layout == "halves" and s.has_qkv_bias and not s.tied_embeddings
    assert w["blk.3.attn_k_bias"].shape == (64,)


def test_backend_layout_and_files(tmp_path):
    s, logical = load_model(synth("qwen2-bias-f32"))
    tensors = wt.backend_weights(s, logical)
    qkv = tensors["w.blk.1.w_qkv"]
    assert qkv.shape == (256, 256 + 2 * 64)  # [H, (q + 2 kv) d]: X @ W_qkv
    np.testing.assert_array_equal(qkv[:, 256:320], logical["blk.1.attn_k"].T)
    np.testing.assert_array_equal(tensors["w.blk.1.b_qkv"][320:], logical["blk.1.attn_v_bias"])
    assert tensors["w.rope_cos"].shape == (256, 16)
    for dtype in ("f32", "bf16", "f16"):
        entries = wt.export_weights(str(tmp_path / dtype), tensors, dtype)
        back = wt.load_exported(str(tmp_path / dtype), entries)
        tol = {"f32": 0, "bf16": 2 ** -8, "f16": 2 ** -11}[dtype]
        for e in entries:
            a, b = tensors[e["name"]], back[e["name"]]
            assert e["dtype"] == ("f32" if e["name"].startswith("w.rope_") else dtype)
            assert np.all(np.abs(a - b) <= tol * np.abs(a) + 1e-7), e["name"]  # f16 subnormals


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def hf_from_gguf_llama(out_dir):
    """An HF Llama directory with the weights of the synth-gqa llama GGUF: llama.cpp's
    converter permutes Q / K rows from HF's half-split pairs to interleaved pairs; undo it."""
    s, w = load_model(synth("llama-gqa-f32"))

    def unpermute(m, heads):
        d = m.shape[0] // heads
        return m.reshape(heads, d // 2, 2, -1).swapaxes(1, 2).reshape(m.shape)

    t = {"model.embed_tokens.weight": w["token_embd"], "model.norm.weight": w["output_norm"],
         "lm_head.weight": w["output"]}
    for l in range(s.n_layers):
        p = f"model.layers.{l}."
        t.update({p + "input_layernorm.weight": w[f"blk.{l}.attn_norm"],
                  p + "self_attn.q_proj.weight": unpermute(w[f"blk.{l}.attn_q"], s.n_heads),
                  p + "self_attn.k_proj.weight": unpermute(w[f"blk.{l}.attn_k"], s.n_kv_heads),
                  p + "self_attn.v_proj.weight": w[f"blk.{l}.attn_v"],
                  p + "self_attn.o_proj.weight": w[f"blk.{l}.attn_output"],
                  p + "post_attention_layernorm.weight": w[f"blk.{l}.ffn_norm"],
                  p + "mlp.gate_proj.weight": w[f"blk.{l}.ffn_gate"],
                  p + "mlp.up_proj.weight": w[f"blk.{l}.ffn_up"],
                  p + "mlp.down_proj.weight": w[f"blk.{l}.ffn_down"]})
    os.makedirs(out_dir)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), t)
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": s.n_embd,
              "num_hidden_layers": s.n_layers, "num_attention_heads": s.n_heads,
              "num_key_value_heads": s.n_kv_heads, "intermediate_size": s.n_ff,
              "vocab_size": s.vocab_size, "max_position_embeddings": s.context_length,
              "rms_norm_eps": s.rms_eps, "rope_theta": s.rope_theta, "hidden_act": "silu"}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f)
    return out_dir


def test_hf_directory_gives_the_gguf_models_logits(tmp_path):
    """Half-split RoPE over un-permuted HF weights = interleaved RoPE over GGUF's."""
    from conftest import build_artifacts
    from tools.neuron_build.run import Runner

    hf_dir = hf_from_gguf_llama(str(tmp_path / "hf"))
    s, _ = load_model(hf_dir)
    assert s.source_format == "hf" and s.rope_layout == "halves"
    build_artifacts(hf_dir, tmp_path / "a_hf")
    build_artifacts(synth("llama-gqa-f32"), tmp_path / "a_gguf")
    ids = [1, 303, 281, 269, 435, 447, 275, 429]
    outs = []
    for d in ("a_hf", "a_gguf"):
        r = Runner(str(tmp_path / d))
        blocks = r.blocks_for(len(ids))
        outs.append(np.stack([r.decode([([t], i, blocks)])[0][0].numpy()
                              for i, t in enumerate(ids)]))
    assert np.abs(outs[0] - outs[1]).max() < 1e-4


def test_make_model_hf_directory_exports(tmp_path):
    """A tiny HF directory written by `pagoda make-model` (Qwen3: QK norm) loads and builds."""
    from conftest import build_artifacts

    out = tmp_path / "tiny-hf"
    done = subprocess.run([pagoda(), "make-model", "-o", str(out), "--preset", "tiny",
                           "--format", "safetensors", "--arch", "qwen3", "-q"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    s, w = load_model(str(out))
    assert s.architecture == "qwen3" and s.has_qk_norm
    assert "blk.0.attn_q_norm" in w
    summary = build_artifacts(str(out), tmp_path / "a")
    assert summary["weights"] > 0 and summary["programs"]
