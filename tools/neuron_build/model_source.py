"""Reads a model (GGUF file or Hugging Face directory) into a ``ModelSpec`` and its weights.

``ModelSpec`` mirrors Pagoda's ``ModelConfig`` (model/model_config.h): the same fields, read
from the same GGUF keys and ``config.json`` fields, with the same architecture rules (llama:
interleaved RoPE pairs; qwen2: half-split RoPE and QKV bias; qwen3: half-split RoPE and per-head
QK RMSNorm; every HF architecture uses half-split pairs; Mistral / ``use_sliding_window`` give a
sliding window). ``rope_inv_freq`` reproduces ``RopeInvFreq`` in float64, RoPE scaling
included.

``load_weights`` returns the weights under Pagoda's own logical names (``token_embd``,
``blk.{l}.attn_q`` ...) as float32 arrays shaped ``[out, in]`` like Pagoda's ``WeightView``;
``weights.export_weights`` turns them into the backend's layout.
"""
import dataclasses
import math
import os

import numpy as np

from . import gguf, hf


class ModelError(ValueError):
    """A model the builder cannot take (unsupported architecture, bad metadata)."""


@dataclasses.dataclass
class ModelSpec:
    """The hyper-parameters of a Llama-family decoder (Pagoda's ModelConfig)."""
    architecture: str
    n_embd: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_ff: int
    vocab_size: int
    context_length: int
    rms_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_dim: int = 0
    rope_layout: str = "interleaved"  # "interleaved" (x[2i], x[2i+1]) | "halves" (x[i], x[i+d/2])
    tied_embeddings: bool = False
    has_qkv_bias: bool = False
    has_qk_norm: bool = False
    sliding_window: int = 0
    rope_scaling: str = "none"  # none | linear | llama3
    rope_scaling_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_context: int = 0
    rope_freq_factors: list = dataclasses.field(default_factory=list)
    source: str = ""
    source_format: str = ""  # gguf | hf

    @property
    def q_dim(self):
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self):
        return self.n_kv_heads * self.head_dim

    def validate(self):
        for field in ("n_embd", "n_layers", "n_heads", "n_kv_heads", "head_dim", "n_ff",
                      "vocab_size", "context_length"):
            if getattr(self, field) <= 0:
                raise ModelError(f"{field}: {getattr(self, field)} (expected > 0)")
        if self.n_heads % self.n_kv_heads:
            raise ModelError(f"n_kv_heads: {self.n_kv_heads} does not divide n_heads "
                             f"{self.n_heads}")
        if not (0 < self.rope_dim <= self.head_dim and self.rope_dim % 2 == 0):
            raise ModelError(f"rope_dim: {self.rope_dim} (expected an even number in "
                             f"2..head_dim {self.head_dim})")

    def rope_inv_freq(self):
        """The per-pair inverse frequencies [rope_dim / 2] in float64 (Pagoda's RopeInvFreq)."""
        half = self.rope_dim // 2
        inv = [math.pow(float(np.float32(self.rope_theta)), -2.0 * i / self.rope_dim)
               for i in range(half)]
        if self.rope_freq_factors and len(self.rope_freq_factors) == half:
            inv = [f / float(np.float32(d)) for f, d in zip(inv, self.rope_freq_factors)]
        elif self.rope_scaling == "llama3" and self.rope_original_context > 0:
            factor = float(np.float32(self.rope_scaling_factor))
            lo = float(np.float32(self.rope_low_freq_factor))
            hi = float(np.float32(self.rope_high_freq_factor))
            orig = float(self.rope_original_context)
            out = []
            for f in inv:
                wavelen = 2.0 * math.pi / f
                if wavelen < orig / hi:
                    out.append(f)
                elif wavelen > orig / lo:
                    out.append(f / factor)
                else:
                    smooth = (orig / wavelen - lo) / (hi - lo)
                    out.append((1.0 - smooth) * f / factor + smooth * f)
            inv = out
        if self.rope_scaling == "linear":
            inv = [f / float(np.float32(self.rope_scaling_factor)) for f in inv]
        return np.array(inv, dtype=np.float64)

    def rope_tables(self):
        """cos / sin [context_length, rope_dim / 2] float32: cos(pos * inv_freq) computed in
        float64 and rounded once, exactly as Pagoda's ApplyRope."""
        pos = np.arange(self.context_length, dtype=np.float64)[:, None]
        theta = pos * self.rope_inv_freq()[None, :]
        return np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# GGUF


def _spec_from_gguf(f):
    arch = f.get("general.architecture")
    if arch not in ("llama", "qwen2", "qwen3"):
        raise ModelError(f"metadata 'general.architecture': '{arch}' is not supported "
                         "(expected llama, qwen2 or qwen3)")
    a = arch + "."

    def need(key):
        if a + key not in f.metadata:
            raise ModelError(f"metadata '{a + key}' is missing")
        return int(f.metadata[a + key])

    n_embd, n_heads = need("embedding_length"), need("attention.head_count")
    spec = ModelSpec(architecture=arch, n_embd=n_embd, n_layers=need("block_count"),
                     n_heads=n_heads,
                     n_kv_heads=int(f.get(a + "attention.head_count_kv", n_heads)),
                     head_dim=int(f.get(a + "attention.key_length", n_embd // n_heads)),
                     n_ff=need("feed_forward_length"), vocab_size=0,
                     context_length=need("context_length"))
    spec.rope_dim = int(f.get(a + "rope.dimension_count", spec.head_dim))
    spec.rope_theta = float(f.get(a + "rope.freq_base", 10000.0))
    spec.rms_eps = float(f.get(a + "attention.layer_norm_rms_epsilon", 1e-5))
    spec.rope_layout = "interleaved" if arch == "llama" else "halves"
    spec.has_qkv_bias = arch == "qwen2"
    spec.has_qk_norm = arch == "qwen3"
    _gguf_rope_scaling(f, a, spec)
    if "token_embd.weight" not in f.tensors or len(f.tensors["token_embd.weight"].ne) != 2:
        raise ModelError("tensor 'token_embd.weight': missing or not 2-D")
    spec.vocab_size = int(f.tensors["token_embd.weight"].ne[1])
    spec.tied_embeddings = "output.weight" not in f.tensors
    return spec


def _gguf_rope_scaling(f, a, spec):
    rtype = f.get(a + "rope.scaling.type")
    factor = float(f.get(a + "rope.scaling.factor", 0.0) or 0.0)
    if factor == 0.0:
        factor = float(f.get(a + "rope.scale_linear", 0.0) or 0.0)
    spec.rope_original_context = int(f.get(a + "rope.scaling.original_context_length", 0))
    t = rtype if rtype is not None else ("linear" if factor > 0 else "none")
    if t == "linear" and factor > 0 and factor != 1.0:
        spec.rope_scaling, spec.rope_scaling_factor = "linear", factor
    elif t not in ("none", "linear"):
        raise ModelError(f"metadata '{a}rope.scaling.type': '{t}' is not supported")
    if "rope_freqs.weight" in f.tensors:
        spec.rope_freq_factors = [float(v) for v in f.tensor("rope_freqs.weight").ravel()]
        if spec.rope_scaling == "none":
            spec.rope_scaling = "llama3"
            spec.rope_scaling_factor = max([1.0] + spec.rope_freq_factors)


_GGUF_LAYER = {"attn_norm": "attn_norm.weight", "attn_q": "attn_q.weight",
               "attn_k": "attn_k.weight", "attn_v": "attn_v.weight",
               "attn_output": "attn_output.weight", "ffn_norm": "ffn_norm.weight",
               "ffn_gate": "ffn_gate.weight", "ffn_up": "ffn_up.weight",
               "ffn_down": "ffn_down.weight"}
_BIAS = {"attn_q_bias": "attn_q.bias", "attn_k_bias": "attn_k.bias", "attn_v_bias": "attn_v.bias"}
_QK_NORM = {"attn_q_norm": "attn_q_norm.weight", "attn_k_norm": "attn_k_norm.weight"}


def _gguf_weights(f, spec):
    w = {"token_embd": f.tensor("token_embd.weight"),
         "output_norm": f.tensor("output_norm.weight")}
    if not spec.tied_embeddings:
        w["output"] = f.tensor("output.weight")
    for layer in range(spec.n_layers):
        names = dict(_GGUF_LAYER)
        if spec.has_qkv_bias:
            names.update(_BIAS)
        if spec.has_qk_norm:
            names.update(_QK_NORM)
        for key, suffix in names.items():
            w[f"blk.{layer}.{key}"] = f.tensor(f"blk.{layer}.{suffix}")
    return w


# ---------------------------------------------------------------------------------------------
# Hugging Face


_HF_ARCHS = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
             "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}


def _spec_from_hf(cfg):
    archs = cfg.get("architectures") or []
    if not archs or archs[0] not in _HF_ARCHS:
        raise ModelError(f"config.json: architectures: {archs} is not supported "
                         f"(expected one of {sorted(_HF_ARCHS)})")
    arch = _HF_ARCHS[archs[0]]
    if cfg.get("hidden_act", "silu") != "silu":
        raise ModelError(f"config.json: hidden_act: {cfg['hidden_act']} (expected silu)")
    if cfg.get("partial_rotary_factor", 1.0) != 1.0:
        raise ModelError("config.json: partial_rotary_factor: only 1.0 is supported")
    n_embd, n_heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    spec = ModelSpec(architecture=arch, n_embd=n_embd, n_layers=int(cfg["num_hidden_layers"]),
                     n_heads=n_heads, n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
                     head_dim=int(cfg.get("head_dim") or n_embd // n_heads),
                     n_ff=int(cfg["intermediate_size"]), vocab_size=int(cfg["vocab_size"]),
                     context_length=int(cfg["max_position_embeddings"]))
    spec.rope_dim = spec.head_dim
    spec.rope_layout = "halves"
    spec.rms_eps = float(cfg.get("rms_norm_eps", 1e-5))
    spec.rope_theta = float(cfg.get("rope_theta", 10000.0))
    spec.tied_embeddings = bool(cfg.get("tie_word_embeddings", False))
    spec.has_qkv_bias = arch == "qwen2"
    spec.has_qk_norm = arch == "qwen3"
    if arch == "mistral" or cfg.get("use_sliding_window", False):
        spec.sliding_window = int(cfg.get("sliding_window") or 0)
    scaling = cfg.get("rope_scaling")
    if scaling:
        t = scaling.get("rope_type", scaling.get("type"))
        if t in ("linear", "llama3"):
            spec.rope_scaling, spec.rope_scaling_factor = t, float(scaling["factor"])
            if t == "llama3":
                spec.rope_low_freq_factor = float(scaling.get("low_freq_factor", 1.0))
                spec.rope_high_freq_factor = float(scaling.get("high_freq_factor", 4.0))
                spec.rope_original_context = int(scaling["original_max_position_embeddings"])
        elif t != "default":
            raise ModelError(f"config.json: rope_scaling.type: '{t}' is not supported")
    return spec


def _hf_weights(st, spec):
    w = {"token_embd": st.tensor("model.embed_tokens.weight"),
         "output_norm": st.tensor("model.norm.weight")}
    if not spec.tied_embeddings:
        w["output"] = st.tensor("lm_head.weight")
    for layer in range(spec.n_layers):
        p, a = f"model.layers.{layer}.", f"model.layers.{layer}.self_attn."
        names = {"attn_norm": p + "input_layernorm.weight", "attn_q": a + "q_proj.weight",
                 "attn_k": a + "k_proj.weight", "attn_v": a + "v_proj.weight",
                 "attn_output": a + "o_proj.weight",
                 "ffn_norm": p + "post_attention_layernorm.weight",
                 "ffn_gate": p + "mlp.gate_proj.weight", "ffn_up": p + "mlp.up_proj.weight",
                 "ffn_down": p + "mlp.down_proj.weight"}
        if spec.has_qkv_bias:
            names.update({"attn_q_bias": a + "q_proj.bias", "attn_k_bias": a + "k_proj.bias",
                          "attn_v_bias": a + "v_proj.bias"})
        if spec.has_qk_norm:
            names.update({"attn_q_norm": a + "q_norm.weight", "attn_k_norm": a + "k_norm.weight"})
        for key, name in names.items():
            w[f"blk.{layer}.{key}"] = st.tensor(name)
    return w


# ---------------------------------------------------------------------------------------------


def expected_shapes(spec):
    """Pagoda's shape of every logical weight ([out, in] for matrices)."""
    s = {"token_embd": (spec.vocab_size, spec.n_embd), "output_norm": (spec.n_embd,)}
    if not spec.tied_embeddings:
        s["output"] = (spec.vocab_size, spec.n_embd)
    for layer in range(spec.n_layers):
        b = f"blk.{layer}."
        s.update({b + "attn_norm": (spec.n_embd,), b + "attn_q": (spec.q_dim, spec.n_embd),
                  b + "attn_k": (spec.kv_dim, spec.n_embd),
                  b + "attn_v": (spec.kv_dim, spec.n_embd),
                  b + "attn_output": (spec.n_embd, spec.q_dim), b + "ffn_norm": (spec.n_embd,),
                  b + "ffn_gate": (spec.n_ff, spec.n_embd), b + "ffn_up": (spec.n_ff, spec.n_embd),
                  b + "ffn_down": (spec.n_embd, spec.n_ff)})
        if spec.has_qkv_bias:
            s.update({b + "attn_q_bias": (spec.q_dim,), b + "attn_k_bias": (spec.kv_dim,),
                      b + "attn_v_bias": (spec.kv_dim,)})
        if spec.has_qk_norm:
            s.update({b + "attn_q_norm": (spec.head_dim,), b + "attn_k_norm": (spec.head_dim,)})
    return s


def load_model(path):
    """(ModelSpec, {logical name: float32 array}) of a GGUF file or an HF directory."""
    if os.path.isdir(path):
        spec = _spec_from_hf(hf.read_config(path))
        spec.source_format = "hf"
        weights = _hf_weights(hf.SafetensorsSet(path), spec)
    else:
        f = gguf.GgufFile(path)
        spec = _spec_from_gguf(f)
        spec.source_format = "gguf"
        weights = _gguf_weights(f, spec)
    spec.source = os.path.abspath(path)
    spec.validate()
    for name, shape in expected_shapes(spec).items():
        if tuple(weights[name].shape) != tuple(shape):
            raise ModelError(f"tensor '{name}': shape {list(weights[name].shape)}, expected "
                             f"{list(shape)}")
    return spec, weights
