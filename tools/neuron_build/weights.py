"""The backend's weight layout: named raw-byte tensors bound into every program.

Each program takes the weights as named inputs (``weights.mode: separate`` in the manifest).
The layout follows what the two seed kernels consume (docs: ../shared/docs/seed-kernels.md):

====================== ========================== ============================================
name                   shape                      meaning
====================== ========================== ============================================
w.token_embd           [vocab, n_embd]            embedding rows
w.output_norm          [n_embd]                   final RMSNorm gamma
w.output               [vocab, n_embd]            LM head (absent when tied to token_embd)
w.rope_cos, w.rope_sin [context, rope_dim / 2]    cos / sin(pos * inv_freq), RoPE scaling applied
w.blk.L.attn_norm      [n_embd]                   the TKG kernel's rmsnorm_X_gamma
w.blk.L.w_qkv          [n_embd, (q + 2 kv) * d]   W_qkv: X @ W_qkv, columns Q | K | V head-major
w.blk.L.b_qkv          [(q + 2 kv) * d]           bias_qkv (QKV-bias models only)
w.blk.L.q_norm, k_norm [d]                        pre-RoPE per-head RMSNorm gammas (Qwen3 only)
w.blk.L.w_out          [q * d, n_embd]            W_out
w.blk.L.ffn_norm       [n_embd]                   MLP RMSNorm gamma
w.blk.L.w_gate, w_up   [n_embd, n_ff]             SwiGLU: silu(x @ w_gate) * (x @ w_up)
w.blk.L.w_down         [n_ff, n_embd]
====================== ========================== ============================================

RoPE tables are precomputed in float64 and rounded once, so the programs rotate exactly as
Pagoda's CPU engine does. Files are raw little-endian bytes of the manifest dtype.
"""
import os

import numpy as np

# Manifest dtype name -> (bytes per element, converter from float32).
DTYPES = ("f32", "bf16", "f16")


def to_bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (NaN kept quiet)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    out[nan] = 0x7FC0
    return out


def from_bf16_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def encode(x, dtype):
    """Raw little-endian bytes of `x` in manifest dtype `dtype`."""
    if dtype == "f32":
        return np.ascontiguousarray(x, dtype="<f4").tobytes()
    if dtype == "f16":
        return np.ascontiguousarray(x, dtype="<f2").tobytes()
    if dtype == "bf16":
        return to_bf16_bits(x).astype("<u2").tobytes()
    raise ValueError(f"weight dtype '{dtype}' (expected one of {DTYPES})")


def decode(raw, dtype, shape):
    """The inverse of `encode`, as float32."""
    if dtype == "f32":
        return np.frombuffer(raw, dtype="<f4").reshape(shape).copy()
    if dtype == "f16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(shape)
    if dtype == "bf16":
        return from_bf16_bits(np.frombuffer(raw, dtype="<u2")).reshape(shape)
    raise ValueError(f"weight dtype '{dtype}'")


def backend_weights(spec, logical):
    """{backend name: float32 array} in the layout of the table above, in binding order."""
    out = {"w.token_embd": logical["token_embd"], "w.output_norm": logical["output_norm"]}
    if not spec.tied_embeddings:
        out["w.output"] = logical["output"]
    cos, sin = spec.rope_tables()
    out["w.rope_cos"], out["w.rope_sin"] = cos, sin
    for layer in range(spec.n_layers):
        src, dst = f"blk.{layer}.", f"w.blk.{layer}."
        out[dst + "attn_norm"] = logical[src + "attn_norm"]
        qkv = np.concatenate([logical[src + "attn_q"], logical[src + "attn_k"],
                              logical[src + "attn_v"]], axis=0)
        out[dst + "w_qkv"] = qkv.T
        if spec.has_qkv_bias:
            out[dst + "b_qkv"] = np.concatenate([logical[src + "attn_q_bias"],
                                                 logical[src + "attn_k_bias"],
                                                 logical[src + "attn_v_bias"]])
        if spec.has_qk_norm:
            out[dst + "q_norm"] = logical[src + "attn_q_norm"]
            out[dst + "k_norm"] = logical[src + "attn_k_norm"]
        out[dst + "w_out"] = logical[src + "attn_output"].T
        out[dst + "ffn_norm"] = logical[src + "ffn_norm"]
        out[dst + "w_gate"] = logical[src + "ffn_gate"].T
        out[dst + "w_up"] = logical[src + "ffn_up"].T
        out[dst + "w_down"] = logical[src + "ffn_down"].T
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def file_name(name):
    """weights/<name>.bin with the name's dots kept (names are [a-z0-9._])."""
    return os.path.join("weights", name + ".bin")


def export_weights(out_dir, tensors, dtype, progress=None):
    """Writes every tensor as raw bytes under out_dir/weights/; returns the manifest entries
    ``{name, file, dtype, shape}``. The RoPE tables always stay f32 (they are exact tables)."""
    os.makedirs(os.path.join(out_dir, "weights"), exist_ok=True)
    entries = []
    for name, array in tensors.items():
        d = "f32" if name.startswith("w.rope_") else dtype
        rel = file_name(name)
        with open(os.path.join(out_dir, rel), "wb") as f:
            f.write(encode(array, d))
        entries.append({"name": name, "file": rel, "dtype": d, "shape": list(array.shape)})
        if progress:
            progress(f"weights: {name} {d}{list(array.shape)}")
    return entries


def load_exported(manifest_dir, entries):
    """{name: float32 array} of a manifest's weights.tensors (for the runner and tests)."""
    out = {}
    for e in entries:
        with open(os.path.join(manifest_dir, e["file"]), "rb") as f:
            out[e["name"]] = decode(f.read(), e["dtype"], tuple(e["shape"]))
    return out
