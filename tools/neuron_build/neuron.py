"""The Neuron targets (trn1, trn2, inf2): the NKI kernels behind the model's two attention entry
points, and compilation of each bucket to a NEFF.

Everything from AWS's toolchain is imported lazily, inside the functions below, so the rest of
the package (planning, weights, manifest, cpu-reference) works without it. **None of this has
run here** (no Neuron SDK, no device): the call signatures follow the seed sources
(seed-kernels.md: [S1] vLLM 0.8.5 ``nki_flash_attn.py``, [S2] ``nkilib.core.attention_block_tkg``)
and must be checked on a Neuron host (tools/neuron_build/README.md).

The adaptors do what seed-kernels.md puts on the caller's side: the prefill context padded to
whole ``LARGE_TILE_SZ`` tiles and its mask reordered (1.7), the KV pool passed stacked as
``[2, num_blocks, kvh, bs, d]`` to [S1], per-head slots and tables for [S2] block KV (0.2).
"""
import subprocess

import torch

from . import buckets
from . import kernels_ref


class NeuronUnavailable(RuntimeError):
    """The Neuron toolchain (torch-neuronx / neuronx-cc / NKI) is not installed."""


def _require(module):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        raise NeuronUnavailable(
            f"--target trn1|trn2|inf2 needs AWS's Neuron toolchain ({module}: {e}). Install "
            "torch-neuronx and neuronx-cc from the Neuron SDK on a Neuron host, or build with "
            "--target cpu-reference.") from e


def compiler_version():
    try:
        out = subprocess.run(["neuronx-cc", "--version"], capture_output=True, text=True,
                             timeout=60)
        return "neuronx-cc " + (out.stdout or out.stderr).strip().splitlines()[-1]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "neuronx-cc (version unknown)"


class NkiKernels:
    """The model's kernel module for device builds (same entry points as kernels_ref)."""

    rms_norm = staticmethod(kernels_ref.rms_norm)
    apply_rope = staticmethod(kernels_ref.apply_rope)

    def __init__(self):
        fa = _require("vllm.attention.ops.nki_flash_attn")  # [S1]
        self._flash = fa.flash_paged_attention
        self._tkg = _require("nkilib.core.attention_block_tkg").attention_block_tkg  # [S2]

    def flash_paged_attention(self, query, key, value, k_cache, v_cache, block_tables, mask,
                              softmax_scale):
        bs = k_cache.shape[2]
        context = block_tables.shape[0] * bs
        tile = buckets.large_tile(context, bs)
        mask = kernels_ref.reorder_context_mask(mask, tile, bs)
        kv_cache = torch.stack([k_cache, v_cache])
        n_kv_heads = key.shape[1]
        return self._flash[1, n_kv_heads](query, key, value, kv_cache, block_tables, mask,
                                          softmax_scale=softmax_scale, mixed_precision=True,
                                          LARGE_TILE_SZ=tile)

    def reshape_and_cache(self, key, value, k_cache, v_cache, slot_mapping):
        # The device write skips out-of-range slots (oob_mode.skip); the reference op has the
        # same semantics and lowers to an indirect DMA scatter.
        kernels_ref.reshape_and_cache(key, value, k_cache, v_cache, slot_mapping)

    def attention_block_tkg(self, x, w_qkv, bias_qkv, norm_gamma, norm_eps, q_norm, k_norm,
                            qk_norm_eps, cos, sin, rope_contiguous_layout, k_cache, v_cache,
                            active_blocks_table, pos_ids, kv_cache_update_idx, w_out,
                            softmax_scale, n_heads, sliding_window=0):
        kvh = k_cache.shape[1]
        heads = torch.arange(kvh).reshape(1, -1, 1)
        abt = torch.where(active_blocks_table.unsqueeze(1) >= 0,
                          active_blocks_table.unsqueeze(1) * kvh + heads,
                          torch.full_like(active_blocks_table.unsqueeze(1), -1))
        swa = (pos_ids - sliding_window + 1).clamp(min=0) if sliding_window > 0 else None
        out, _, _ = self._tkg(
            X=x, W_qkv=w_qkv, bias_qkv=bias_qkv, rmsnorm_X_enabled=True,
            rmsnorm_X_gamma=norm_gamma.reshape(1, -1), rmsnorm_X_eps=norm_eps,
            rmsnorm_QK_pre_rope_enabled=q_norm is not None,
            rmsnorm_QK_pre_rope_W_Q=None if q_norm is None else q_norm.reshape(1, -1),
            rmsnorm_QK_pre_rope_W_K=None if k_norm is None else k_norm.reshape(1, -1),
            rmsnorm_QK_pre_rope_eps=qk_norm_eps, cos=cos, sin=sin,
            rope_contiguous_layout=rope_contiguous_layout, K_cache=k_cache, V_cache=v_cache,
            active_blocks_table=abt, pos_ids=pos_ids.float(), swa_start_pos_ids=swa,
            kv_cache_update_idx=kv_cache_update_idx, update_cache=True, W_out=w_out,
            softmax_scale=softmax_scale)
        return out


def compile_program(module, example, target, lnc, workdir):
    """Traces and compiles one bucket's module with torch-neuronx; returns the NEFF bytes.

    torch_neuronx.trace leaves ``graph.neff`` in ``compiler_workdir``; the KV pools and weights
    are inputs (aliased state on the device)."""
    torch_neuronx = _require("torch_neuronx")
    args = f"--target={target} --lnc={lnc} --auto-cast=none"
    torch_neuronx.trace(module, example, compiler_workdir=workdir, compiler_args=args)
    with open(f"{workdir}/graph.neff", "rb") as f:
        return f.read()
