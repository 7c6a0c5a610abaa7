"""Reference implementations of the two seed kernels, in PyTorch, for ``--target cpu-reference``.

They follow the documented semantics of ../shared/docs/seed-kernels.md (section numbers below),
with the kernels' own argument layouts, so the model definition calls them exactly where a
Neuron build calls the NKI kernels:

- ``flash_paged_attention`` ([S1], vLLM's ``nki_flash_attn.py``; seed-kernels.md 1): prefill /
  context encoding over a paged context plus the new tokens' K/V passed as arguments, with a
  dense ``[seq_q, C + seq_q]`` mask; masked scores are -9984 (1.3), so a fully masked (padding)
  row is a finite mean of V. ``reshape_and_cache`` is its separate KV write (1.9) with Pagoda's
  skip rule for slots (0.3).
- ``attention_block_tkg`` ([S2], the NKI library; seed-kernels.md 2): the fused decode block —
  RMSNorm, packed QKV projection (+bias), pre-RoPE per-head QK RMSNorm, RoPE from half-width
  cos/sin tables, attention over a block KV cache with the new tokens in the last ``S_tkg``
  window positions (2.7.1), the in-kernel ``pos_ids`` mask with optional sliding window
  (2.7.2), -inf masking (2.7.3), the cache update after attention at per-head slots (2.8) and
  the output projection (2.9).

Everything computes in float32 (the seeds' fp32 reference mode); caches may be f32, bf16 or f16
and are read and written in their own dtype. The functions are traceable with
``torch.jit.trace``: no data-dependent Python control flow.
"""
import torch

MASKED_SCORE = -9984.0  # [S1]'s masked score (seed-kernels.md 1.3)


def rms_norm(x, gamma, eps):
    """Pagoda's RmsNorm: the mean square in float64, one float32 scale, then x * scale * gamma."""
    ms = x.double().pow(2).mean(dim=-1, keepdim=True)
    scale = torch.rsqrt(ms + eps).float()
    return x * scale * gamma


def apply_rope(x, cos, sin, rope_halves):
    """RoPE on x [B, S, n_heads, d] with cos / sin [B, S, rope_dim / 2] (seed-kernels.md 2.5).
    Half-split pairs (x[i], x[i + rope_dim/2]) when ``rope_halves`` (the kernel's
    rope_contiguous_layout), else interleaved pairs (x[2i], x[2i+1]). Dims past rope_dim (a
    partial rotation) are left as they are."""
    half = cos.shape[-1]
    c = cos.unsqueeze(2)
    s = sin.unsqueeze(2)
    rest = x[..., 2 * half:]
    if rope_halves:
        x0, x1 = x[..., :half], x[..., half:2 * half]
        return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c, rest], dim=-1)
    pairs = x[..., :2 * half].reshape(x.shape[0], x.shape[1], x.shape[2], half, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)
    return torch.cat([rotated, rest], dim=-1)


def _gather_blocks(cache, table):
    """cache [num_blocks, kvh, bs, d], table [..., n] -> [..., kvh, n * bs, d] (float32).
    Entries < 0 read block 0; the caller masks their positions (they contribute nothing)."""
    blocks = cache.index_select(0, table.clamp(min=0).reshape(-1).long()).float()
    kvh, bs, d = cache.shape[1], cache.shape[2], cache.shape[3]
    blocks = blocks.reshape(list(table.shape) + [kvh, bs, d])
    blocks = blocks.transpose(-3, -4)  # [..., kvh, n, bs, d]
    return blocks.reshape(list(table.shape[:-1]) + [kvh, -1, d])


def reshape_and_cache(key, value, k_cache, v_cache, slot_mapping):
    """[S1]'s KV write (seed-kernels.md 1.9) with Pagoda's skip rule (0.3): key / value
    [T, kvh, d] go to ``cache[slot // bs, :, slot % bs, :]``; a slot < 0 or past the pool is
    skipped (never wrapped). In place."""
    nb, kvh, bs, d = k_cache.shape
    valid = (slot_mapping >= 0) & (slot_mapping < nb * bs)
    tokens = torch.nonzero(valid).reshape(-1)
    slots = slot_mapping.index_select(0, tokens).long()
    heads = torch.arange(kvh, dtype=torch.long)
    blocks, offsets = (slots // bs).unsqueeze(1), (slots % bs).unsqueeze(1)
    rows = ((blocks * kvh + heads.unsqueeze(0)) * bs + offsets).reshape(-1)
    k_rows = key.index_select(0, tokens).reshape(-1, d).to(k_cache.dtype)
    v_rows = value.index_select(0, tokens).reshape(-1, d).to(v_cache.dtype)
    k_cache.view(-1, d).index_copy_(0, rows, k_rows)
    v_cache.view(-1, d).index_copy_(0, rows, v_rows)


def flash_paged_attention(query, key, value, k_cache, v_cache, block_tables, mask,
                          softmax_scale):
    """[S1] ``flash_paged_attention`` (seed-kernels.md 1.1-1.5), natural-order mask.

    query [1, n_heads, d, seq_q], key [1, kvh, d, seq_q], value [1, kvh, seq_q, d]: the new
    tokens; k_cache / v_cache [num_blocks, kvh, block_size, d] (the [2][...] pool's halves);
    block_tables [num_active_blocks] (one flat list: context column t reads block
    ``block_tables[t // bs]``, offset ``t % bs``); mask [seq_q, C + seq_q], nonzero = attend,
    with C = num_active_blocks * block_size. New-token columns j > i are masked whatever the
    mask says (1.5). Returns o [1, n_heads, seq_q, d].
    """
    n_heads, seq_q = query.shape[1], query.shape[3]
    kvh = key.shape[1]
    group = n_heads // kvh
    ctx_k = _gather_blocks(k_cache, block_tables.unsqueeze(0))[0]  # [kvh, C, d]
    ctx_v = _gather_blocks(v_cache, block_tables.unsqueeze(0))[0]
    keys = torch.cat([ctx_k, key[0].transpose(1, 2)], dim=1).repeat_interleave(group, dim=0)
    values = torch.cat([ctx_v, value[0]], dim=1).repeat_interleave(group, dim=0)
    q = query[0].transpose(1, 2) * softmax_scale  # [n_heads, seq_q, d]
    scores = torch.matmul(q, keys.transpose(1, 2))  # [n_heads, seq_q, C + seq_q]
    bs = k_cache.shape[2]
    block_ok = (block_tables >= 0).repeat_interleave(bs)  # a -1 block contributes nothing
    i = torch.arange(seq_q).unsqueeze(1)
    j = torch.arange(seq_q).unsqueeze(0)
    allowed = mask != 0
    allowed = torch.cat([allowed[:, :-seq_q] & block_ok.unsqueeze(0),
                         allowed[:, -seq_q:] & (j <= i)], dim=1)
    scores = torch.where(allowed.unsqueeze(0), scores, torch.full_like(scores, MASKED_SCORE))
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, values).unsqueeze(0)  # [1, n_heads, seq_q, d]


def attention_block_tkg(x, w_qkv, bias_qkv, norm_gamma, norm_eps, q_norm, k_norm, qk_norm_eps,
                        cos, sin, rope_contiguous_layout, k_cache, v_cache, active_blocks_table,
                        pos_ids, kv_cache_update_idx, w_out, softmax_scale, n_heads,
                        sliding_window=0):
    """[S2] ``attention_block_tkg`` with block KV, ``pos_ids`` masking and update_cache=True.

    x [B, S_tkg, H]; w_qkv [H, (q + 2 kv) * d] (Q | K | V, head-major); bias_qkv or None;
    norm_gamma [H] (rmsnorm_X, eps ``norm_eps``); q_norm / k_norm [d] or None (pre-RoPE QK
    norm); cos / sin [rope_dim / 2, B, S_tkg]; k_cache / v_cache [num_blocks, kvh, bs, d];
    active_blocks_table [B, n] (-1 = inactive); pos_ids [B, S_tkg]; kv_cache_update_idx
    [B, kvh, S_tkg] per-head slots (rows of the [num_blocks * kvh * bs, d] flattening, 0.2;
    -1 / out of range = skipped); w_out [q * d, H]. The window is S_ctx = n * bs positions, the
    last S_tkg of which are the new tokens (2.7.1); prior position k is visible to every query
    of row b when k < pos_ids[b, 0] (and, with a sliding window W, k >= pos_ids[b, i] - W + 1).
    Returns out [B * S_tkg, H]; the caches are updated in place after attention (2.8).
    """
    b, s, h = x.shape
    d, kvh = k_cache.shape[3], k_cache.shape[1]
    xn = rms_norm(x, norm_gamma, norm_eps)
    qkv = torch.matmul(xn.reshape(b * s, h), w_qkv)
    if bias_qkv is not None:
        qkv = qkv + bias_qkv
    q = qkv[:, :n_heads * d].reshape(b, s, n_heads, d)
    k = qkv[:, n_heads * d:(n_heads + kvh) * d].reshape(b, s, kvh, d)
    v = qkv[:, (n_heads + kvh) * d:].reshape(b, s, kvh, d)
    if q_norm is not None:
        q = rms_norm(q, q_norm, qk_norm_eps)
        k = rms_norm(k, k_norm, qk_norm_eps)
    cos_bs, sin_bs = cos.permute(1, 2, 0), sin.permute(1, 2, 0)  # [B, S, rope_dim / 2]
    q = apply_rope(q, cos_bs, sin_bs, rope_contiguous_layout)
    k = apply_rope(k, cos_bs, sin_bs, rope_contiguous_layout)
    # The new K / V as the cache will hold them (a no-op for an f32 cache).
    k = k.to(k_cache.dtype).float()
    v = v.to(v_cache.dtype).float()
    out = _tkg_attention(q, k, v, k_cache, v_cache, active_blocks_table, pos_ids, softmax_scale,
                         sliding_window)
    _tkg_update_cache(k, v, k_cache, v_cache, kv_cache_update_idx)
    return torch.matmul(out.reshape(b * s, n_heads * d), w_out)


def _tkg_attention(q, k, v, k_cache, v_cache, table, pos_ids, softmax_scale, window):
    """Attention of q [B, S, nh, d] over the prior window and the new k / v [B, S, kvh, d]."""
    b, s, n_heads, d = q.shape
    kvh, bs = k_cache.shape[1], k_cache.shape[2]
    group = n_heads // kvh
    s_ctx = table.shape[1] * bs
    prior_len = s_ctx - s
    prior_k = _gather_blocks(k_cache, table)[:, :, :prior_len]  # [B, kvh, prior, d]
    prior_v = _gather_blocks(v_cache, table)[:, :, :prior_len]
    keys = torch.cat([prior_k, k.transpose(1, 2)], dim=2).repeat_interleave(group, dim=1)
    values = torch.cat([prior_v, v.transpose(1, 2)], dim=2).repeat_interleave(group, dim=1)
    qs = q.transpose(1, 2) * softmax_scale  # [B, nh, S, d]
    scores = torch.matmul(qs, keys.transpose(2, 3))  # [B, nh, S, S_ctx]
    kpos = torch.arange(prior_len).reshape(1, 1, -1)
    block_ok = (table >= 0).repeat_interleave(bs, dim=1)[:, :prior_len].unsqueeze(1)
    prior_ok = (kpos < pos_ids[:, :1].unsqueeze(2)) & block_ok  # [B, 1 -> S, prior]
    i = torch.arange(s).reshape(1, -1, 1)
    j = torch.arange(s).reshape(1, 1, -1)
    tail_ok = (j <= i).expand(b, s, s)
    if window > 0:
        start = (pos_ids - window + 1).unsqueeze(2)  # swa_start_pos_ids (block KV: no wrap)
        prior_ok = prior_ok & (kpos >= start)
        tail_ok = tail_ok & (j > i - window)
    allowed = torch.cat([prior_ok.expand(b, s, prior_len), tail_ok], dim=2).unsqueeze(1)
    scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, values).transpose(1, 2)  # [B, S, nh, d]


def _tkg_update_cache(k, v, k_cache, v_cache, update_idx):
    """Writes k / v [B, S, kvh, d] at per-head slots update_idx [B, kvh, S]; -1 or out of
    range is skipped (2.8)."""
    d = k_cache.shape[3]
    rows = update_idx.transpose(1, 2).reshape(-1).long()  # [B * S * kvh], matches k's order
    limit = k_cache.shape[0] * k_cache.shape[1] * k_cache.shape[2]
    keep = torch.nonzero((rows >= 0) & (rows < limit)).reshape(-1)
    rows = rows.index_select(0, keep)
    k_cache.view(-1, d).index_copy_(0, rows, k.reshape(-1, d).index_select(0, keep)
                                    .to(k_cache.dtype))
    v_cache.view(-1, d).index_copy_(0, rows, v.reshape(-1, d).index_select(0, keep)
                                    .to(v_cache.dtype))


def reorder_context_mask(mask, large_tile, block_size):
    """[S1]'s ``reorder_context_mask`` (seed-kernels.md 1.7): the device's strided order of the
    context columns within each large tile; new-token columns are unchanged. A layout adaptor
    for the Neuron path, the identity when large_tile // block_size >= 128."""
    nb = max(128, large_tile // block_size)
    tbs = large_tile // nb
    if tbs <= 1:
        return mask
    seq_q = mask.shape[0]
    ctx = mask.shape[1] - seq_q
    tiles = mask[:, :ctx].reshape(seq_q, ctx // large_tile, nb // 128, 128, tbs)
    reordered = tiles.permute(0, 1, 2, 4, 3).reshape(seq_q, ctx)
    return torch.cat([reordered, mask[:, ctx:]], dim=1)
