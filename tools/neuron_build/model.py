"""The one model definition: a Llama-family decoder step over Pagoda's paged KV cache.

``DecoderStep`` is one program (bucket). Its inputs are the six per-step tensors of the
backend's I/O contract (docs/neuron-backend.md 5.4), then every layer's K and V pool
(``[num_blocks][n_kv_heads][block_size][head_dim]``, the halves of Pagoda's
``[2][num_blocks][n_kv_heads][block_size][head_dim]`` layout; updated in place, i.e. state
tensors), then the weights in the layout of ``weights.py``. Its output is the logits.

- **prefill** (one sequence, ``tokens`` entries): the real tokens are the first
  ``n = context_lens[0] - position_ids[0]``, at positions ``position_ids[0] + i``; the context
  already cached is ``position_ids[0]`` tokens reached through ``block_table[0]``. Attention is
  ``flash_paged_attention`` with the natural-order mask built here (seed-kernels.md 1.4), then
  ``reshape_and_cache`` writes the new K/V at ``slot_mapping``. Logits: the last real token's
  (``[1, vocab]``).
- **decode** (``rows`` sequences of ``tokens_per_seq`` entries, row-major per sequence): each
  layer's attention is one ``attention_block_tkg`` call with ``pos_ids = position_ids``, the
  per-head slots derived from ``slot_mapping`` (0.2) and the block table widened by enough -1
  blocks that the kernel's tail window (2.7.1) never shadows a cached token. Logits: every
  token entry's (``[rows * tokens_per_seq, vocab]``).

Padding follows the manifest's sentinels: slots ``< 0`` (or past the pool) write nothing, table
entries ``< 0`` are never read, a padding row (``context_lens = 0``) attends only to itself and
gives finite, ignored logits.

``kernels`` is the module with the two entry points: ``kernels_ref`` for cpu-reference, or the
NKI wrappers of ``neuron.py`` for a device build.
"""
import math

import torch

from . import kernels_ref


class ProgramShape:
    """The static shape of one program (a manifest entry)."""

    def __init__(self, phase, tokens, rows, tokens_per_seq, max_ctx_blocks):
        self.phase = phase
        self.tokens = tokens  # per-token entries: prefill max_tokens, decode rows * tps
        self.rows = rows
        self.tokens_per_seq = tokens_per_seq
        self.max_ctx_blocks = max_ctx_blocks


class DecoderStep(torch.nn.Module):
    """One compiled program of the model (see the module docstring for the I/O)."""

    def __init__(self, spec, shape, weight_names, kernels=kernels_ref):
        super().__init__()
        self.spec = spec
        self.shape = shape
        self.weight_names = list(weight_names)
        self.kernels = kernels
        self.scale = 1.0 / math.sqrt(spec.head_dim)

    def forward(self, *args):
        ids, pos, slots, table, ctx = args[:5]
        n_layers = self.spec.n_layers
        kv = args[5:5 + 2 * n_layers]
        w = dict(zip(self.weight_names, args[5 + 2 * n_layers:]))
        x = w["w.token_embd"].index_select(0, ids.long())
        if self.shape.phase == "prefill":
            return self._prefill(x, pos, slots, table, ctx, kv, w)
        return self._decode(x, pos, slots, table, ctx, kv, w)

    # --- shared pieces -------------------------------------------------------------------------

    def _mlp(self, x, w, layer):
        p = f"w.blk.{layer}."
        h = kernels_ref.rms_norm(x, w[p + "ffn_norm"], self.spec.rms_eps)
        gate = torch.matmul(h, w[p + "w_gate"])
        up = torch.matmul(h, w[p + "w_up"])
        act = gate / (1.0 + torch.exp(-gate)) * up
        return x + torch.matmul(act, w[p + "w_down"])

    def _logits(self, h, w):
        h = kernels_ref.rms_norm(h, w["w.output_norm"], self.spec.rms_eps)
        head = w.get("w.output", w["w.token_embd"])
        return torch.matmul(h, head.t())

    def _rope_tables(self, pos, w):
        """cos / sin [rope_dim / 2, *pos.shape] gathered from the exported tables."""
        flat = pos.reshape(-1).long()
        cos = w["w.rope_cos"].index_select(0, flat).t()
        sin = w["w.rope_sin"].index_select(0, flat).t()
        return cos.reshape([-1] + list(pos.shape)), sin.reshape([-1] + list(pos.shape))

    # --- prefill: flash_paged_attention --------------------------------------------------------

    def _prefill_mask(self, pos, ctx, width):
        """[T, C + T] natural-order mask of one sequence (seed-kernels.md 1.4), plus the sliding
        window: context column t (position t) for every real query; new token j <= i for
        real i, j; padding query rows all zero."""
        s = self.spec
        t = self.shape.tokens
        prior = pos[0]
        n = torch.where(ctx[0] > 0, ctx[0] - prior, torch.zeros_like(prior))
        qi = torch.arange(t).unsqueeze(1)
        real_q = qi < n
        qpos = prior + qi
        col = torch.arange(width).unsqueeze(0)
        ctx_ok = real_q & (col < prior)
        kj = torch.arange(t).unsqueeze(0)
        new_ok = real_q & (kj <= qi) & (kj < n)
        if s.sliding_window > 0:
            ctx_ok = ctx_ok & (col > qpos - s.sliding_window)
            new_ok = new_ok & (prior + kj > qpos - s.sliding_window)
        return torch.cat([ctx_ok, new_ok], dim=1).to(torch.int32), n

    def _prefill(self, x, pos, slots, table, ctx, kv, w):
        s = self.spec
        t = self.shape.tokens
        context_cols = self.shape.max_ctx_blocks * kv[0].shape[2]
        mask, n = self._prefill_mask(pos, ctx, context_cols)
        cos, sin = self._rope_tables(pos.unsqueeze(0), w)  # [half, 1, T]
        for layer in range(s.n_layers):
            p = f"w.blk.{layer}."
            h = kernels_ref.rms_norm(x, w[p + "attn_norm"], s.rms_eps)
            qkv = torch.matmul(h, w[p + "w_qkv"])
            if s.has_qkv_bias:
                qkv = qkv + w[p + "b_qkv"]
            q = qkv[:, :s.q_dim].reshape(1, t, s.n_heads, s.head_dim)
            k = qkv[:, s.q_dim:s.q_dim + s.kv_dim].reshape(1, t, s.n_kv_heads, s.head_dim)
            v = qkv[:, s.q_dim + s.kv_dim:].reshape(t, s.n_kv_heads, s.head_dim)
            if s.has_qk_norm:
                q = kernels_ref.rms_norm(q, w[p + "q_norm"], s.rms_eps)
                k = kernels_ref.rms_norm(k, w[p + "k_norm"], s.rms_eps)
            halves = s.rope_layout == "halves"
            q = kernels_ref.apply_rope(q, cos.permute(1, 2, 0), sin.permute(1, 2, 0), halves)
            k = kernels_ref.apply_rope(k, cos.permute(1, 2, 0), sin.permute(1, 2, 0), halves)[0]
            k_cache, v_cache = kv[2 * layer], kv[2 * layer + 1]
            k = k.to(k_cache.dtype).float()  # attention uses what the cache will hold
            v = v.to(v_cache.dtype).float()
            o = self.kernels.flash_paged_attention(
                q[0].permute(1, 2, 0).unsqueeze(0), k.permute(1, 2, 0).unsqueeze(0),
                v.transpose(0, 1).unsqueeze(0), k_cache, v_cache, table[0], mask, self.scale)
            self.kernels.reshape_and_cache(k, v, k_cache, v_cache, slots)
            attn = o[0].transpose(0, 1).reshape(t, s.q_dim)
            x = x + torch.matmul(attn, w[p + "w_out"])
            x = self._mlp(x, w, layer)
        last = (n - 1).clamp(min=0).reshape(1).long()
        return self._logits(x.index_select(0, last), w)

    # --- decode: attention_block_tkg -----------------------------------------------------------

    def _per_head_slots(self, slots, nb, bs):
        """[B, kvh, S] per-head rows of the [num_blocks * kvh * bs, d] flattening (0.2); -1 for
        a skipped slot (< 0 or past the pool)."""
        s = self.spec
        rows, tps = self.shape.rows, self.shape.tokens_per_seq
        sl = slots.reshape(rows, 1, tps).long()
        h = torch.arange(s.n_kv_heads).reshape(1, -1, 1)
        per_head = ((sl // bs) * s.n_kv_heads + h) * bs + sl % bs
        valid = (sl >= 0) & (sl < nb * bs)
        return torch.where(valid, per_head, torch.full_like(per_head, -1))

    def _decode(self, x, pos, slots, table, ctx, kv, w):
        s = self.spec
        rows, tps = self.shape.rows, self.shape.tokens_per_seq
        nb, bs = kv[0].shape[0], kv[0].shape[2]
        # Widen the table with -1 blocks: the kernel's window puts the tps new tokens in its
        # last positions, so the prior region must hold max_ctx_blocks * bs cached tokens.
        extra = (tps + bs - 1) // bs
        abt = torch.cat([table, torch.full((rows, extra), -1, dtype=table.dtype)], dim=1)
        pos_ids = pos.reshape(rows, tps)
        update_idx = self._per_head_slots(slots, nb, bs)
        cos, sin = self._rope_tables(pos_ids, w)  # [half, B, S]
        x = x.reshape(rows, tps, s.n_embd)
        for layer in range(s.n_layers):
            p = f"w.blk.{layer}."
            out = self.kernels.attention_block_tkg(
                x, w[p + "w_qkv"], w.get(p + "b_qkv"), w[p + "attn_norm"], s.rms_eps,
                w.get(p + "q_norm"), w.get(p + "k_norm"), s.rms_eps, cos, sin,
                s.rope_layout == "halves", kv[2 * layer], kv[2 * layer + 1], abt, pos_ids,
                update_idx, w[p + "w_out"], self.scale, s.n_heads, s.sliding_window)
            x = x + out.reshape(rows, tps, s.n_embd)
            x = self._mlp(x, w, layer)
        return self._logits(x.reshape(rows * tps, s.n_embd), w)
