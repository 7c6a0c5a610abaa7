"""Bucket planning: which programs to build, checked against the seed kernels' constraints.

A bucket is a compile-time shape. Prefill buckets are (tokens, context blocks) for one
sequence; decode buckets are (sequences, tokens per sequence, context blocks) — tokens per
sequence is 1 for plain decoding and k + 1 to verify k speculative tokens. All buckets share one
KV pool (``num_blocks`` x ``block_size``) and dtypes.

The bucket file (``--buckets FILE.yaml``) looks like::

    block_size: 16          # tokens per KV block (a power of two)
    num_blocks: 128         # KV pool blocks, shared by every program
    kv_dtype: f32           # f32 | bf16 | f16
    weight_dtype: f32       # f32 | bf16 | f16
    prefill:
      - {tokens: 16, ctx_blocks: 8}
      - {tokens: 64, ctx_blocks: 8}
    decode:
      - {seqs: 1, ctx_blocks: 8}                     # tokens_per_seq defaults to 1
      - {seqs: 4, tokens_per_seq: 4, ctx_blocks: 8}  # verifies 3 draft tokens

Every key is optional; what is missing comes from ``default_plan``. Constraints (``check``)
come from seed-kernels.md: for every target the TKG kernel's ``S_tkg <= 8`` and
``B * S_tkg * q_heads <= 128`` (2.1 / 2.12; the older form of the batch limit, kept because it
is the one every NKI version accepts), ``d <= 128`` and even (1.2, 2.12), the manifest's block
sizes (power of two, 1..256) and a context no wider than the model's; for the Neuron targets
also the device tiling: ``H % 128 == 0`` (2.12), ``block_size <= 128`` (one partition per
token), prefill ``seq_q`` a multiple of 128 (of 512 above 512, of 2048 above 4096; 1.2) and a
prefill context that is a whole number of ``LARGE_TILE_SZ`` tiles with the tile/block ratios
1.2 asks for. A bucket that breaks one is rejected with the rule it breaks.
"""
import dataclasses

NEURON_TARGETS = ("trn1", "trn2", "inf2")
TARGETS = NEURON_TARGETS + ("cpu-reference",)
TKG_MAX_TOKENS_PER_SEQ = 8
TKG_MAX_ROWS = 128  # B * S_tkg * q_heads
MAX_HEAD_DIM = 128
LARGE_TILES = (2048, 1024, 512)


class PlanError(ValueError):
    """A bucket plan that breaks a kernel constraint or is malformed."""


@dataclasses.dataclass(frozen=True)
class Bucket:
    phase: str  # prefill | decode
    ctx_blocks: int
    tokens: int = 0  # prefill: tokens per execution
    seqs: int = 1  # decode: sequences per execution
    tokens_per_seq: int = 1  # decode: new tokens per sequence

    @property
    def id(self):
        if self.phase == "prefill":
            return f"prefill_t{self.tokens}_c{self.ctx_blocks}"
        return f"decode_b{self.seqs}_t{self.tokens_per_seq}_c{self.ctx_blocks}"


@dataclasses.dataclass
class Plan:
    block_size: int
    num_blocks: int
    kv_dtype: str
    weight_dtype: str
    buckets: list

    def prefill(self):
        return [b for b in self.buckets if b.phase == "prefill"]

    def decode(self):
        return [b for b in self.buckets if b.phase == "decode"]


def _ceil_div(a, b):
    return (a + b - 1) // b


def _pow2(n):
    return n >= 1 and n & (n - 1) == 0


def default_plan(spec, target):
    """A plan for `spec` when no bucket file is given: full-context buckets, prefill chunks of
    128 and 512 tokens (64 and 16 for a context below 128), decode batches 1..8 of one token
    and verification buckets of 4 tokens, all filtered by the kernels' constraints."""
    neuron = target in NEURON_TARGETS
    block_size = 32 if neuron else 16
    ctx = min(spec.context_length, 4096 if neuron else 2048)
    ctx_blocks = _ceil_div(ctx, block_size)
    if neuron:  # whole LARGE_TILE_SZ tiles of context
        ctx_blocks = _ceil_div(ctx_blocks * block_size, 512) * 512 // block_size
    sizes = (128, 512) if neuron or ctx >= 512 else (16, 64)
    buckets = [Bucket("prefill", ctx_blocks, tokens=t) for t in sizes
               if t <= ctx_blocks * block_size]
    for seqs in (1, 2, 4, 8):
        buckets.append(Bucket("decode", ctx_blocks, seqs=seqs))
    for seqs in (1, 4):
        buckets.append(Bucket("decode", ctx_blocks, seqs=seqs, tokens_per_seq=4))
    dtype = "bf16" if neuron else "f32"
    plan = Plan(block_size, 8 * ctx_blocks, dtype, dtype, buckets)
    plan.buckets = [b for b in buckets if not bucket_violations(spec, plan, b, target)]
    return plan


def load_plan(spec, target, path=None, overrides=None):
    """The plan of bucket file `path` (YAML), completed from ``default_plan``; then
    ``overrides`` (e.g. {"num_blocks": 64} from the command line). Raises PlanError."""
    plan = default_plan(spec, target)
    if path:
        import yaml  # Debian's python3-yaml

        with open(path) as f:
            doc = yaml.safe_load(f) or {}
        if not isinstance(doc, dict):
            raise PlanError(f"{path}: expected a mapping")
        unknown = set(doc) - {"block_size", "num_blocks", "kv_dtype", "weight_dtype", "prefill",
                              "decode"}
        if unknown:
            raise PlanError(f"{path}: unknown keys {sorted(unknown)}")
        for key in ("block_size", "num_blocks", "kv_dtype", "weight_dtype"):
            if key in doc:
                setattr(plan, key, doc[key])
        if "prefill" in doc or "decode" in doc:
            plan.buckets = _parse_buckets(doc, path)
    for key, value in (overrides or {}).items():
        if value is not None:
            setattr(plan, key, value)
    check(spec, plan, target)
    return plan


def _parse_buckets(doc, path):
    out = []
    for phase, keys in (("prefill", {"tokens", "ctx_blocks"}),
                        ("decode", {"seqs", "tokens_per_seq", "ctx_blocks"})):
        for i, entry in enumerate(doc.get(phase) or []):
            where = f"{path}: {phase}[{i}]"
            if not isinstance(entry, dict) or set(entry) - keys:
                raise PlanError(f"{where}: expected a mapping with keys {sorted(keys)}")
            if any(not isinstance(v, int) or isinstance(v, bool) for v in entry.values()):
                raise PlanError(f"{where}: values must be integers")
            if "ctx_blocks" not in entry or (phase == "prefill" and "tokens" not in entry):
                raise PlanError(f"{where}: needs ctx_blocks" +
                                (" and tokens" if phase == "prefill" else ""))
            out.append(Bucket(phase, **entry))
    return out


def bucket_violations(spec, plan, b, target):
    """The constraints bucket `b` breaks (empty when it is buildable)."""
    bs = plan.block_size
    out = []
    if b.ctx_blocks < 1:
        out.append("ctx_blocks must be >= 1")
    if b.ctx_blocks > plan.num_blocks:
        out.append(f"ctx_blocks {b.ctx_blocks} exceeds num_blocks {plan.num_blocks}")
    # Wider than the model's context is waste; a Neuron prefill context may round up to a tile.
    widest = max(spec.context_length, LARGE_TILES[0] if target in NEURON_TARGETS else 0)
    if b.ctx_blocks > _ceil_div(widest, bs):
        out.append(f"ctx_blocks {b.ctx_blocks} x block_size {bs} is wider than the model's "
                   f"context {spec.context_length}")
    if b.phase == "prefill":
        out += _prefill_violations(plan, b, target)
    else:
        out += _decode_violations(spec, b)
    return out


def _prefill_violations(plan, b, target):
    out = []
    bs = plan.block_size
    if b.tokens < 1:
        out.append("tokens must be >= 1")
    if b.tokens > b.ctx_blocks * bs:
        out.append(f"tokens {b.tokens} exceed the context ctx_blocks x block_size")
    if target not in NEURON_TARGETS:
        return out
    if b.tokens % 128:
        out.append(f"flash_paged_attention: seq_q {b.tokens} is not a multiple of 128 (1.2)")
    elif b.tokens > 4096 and b.tokens % 2048:
        out.append(f"flash_paged_attention: seq_q {b.tokens} > 4096 must be a multiple of 2048")
    elif b.tokens > 512 and b.tokens % 512:
        out.append(f"flash_paged_attention: seq_q {b.tokens} > 512 must be a multiple of 512")
    if large_tile(b.ctx_blocks * bs, bs) is None:
        out.append(f"flash_paged_attention: context {b.ctx_blocks * bs} tokens is not a whole "
                   "number of LARGE_TILE_SZ tiles (2048, 1024 or 512) with block ratios of 1.2")
    return out


def _decode_violations(spec, b):
    out = []
    if b.seqs < 1:
        out.append("seqs must be >= 1")
    if not 1 <= b.tokens_per_seq <= TKG_MAX_TOKENS_PER_SEQ:
        out.append(f"attention_block_tkg: tokens_per_seq {b.tokens_per_seq} outside "
                   f"1..{TKG_MAX_TOKENS_PER_SEQ} (S_tkg)")
    rows = b.seqs * b.tokens_per_seq * spec.n_heads
    if rows > TKG_MAX_ROWS:
        out.append(f"attention_block_tkg: B x S_tkg x q_heads = {b.seqs} x {b.tokens_per_seq} x "
                   f"{spec.n_heads} = {rows} > {TKG_MAX_ROWS}")
    return out


def large_tile(context, block_size):
    """The LARGE_TILE_SZ for a prefill context of `context` tokens: the largest of 2048, 1024,
    512 that divides it and meets 1.2's ratio rules; None if none does."""
    for tile in LARGE_TILES:
        if context % tile:
            continue
        ratio = tile // block_size
        if tile % block_size or not _pow2(ratio):
            continue
        if ratio < 128 and (128 % ratio or block_size % (128 // ratio)):
            continue
        return tile
    return None


def model_violations(spec, plan, target):
    """Constraints on the model and the shared KV pool (not a single bucket)."""
    out = []
    if spec.head_dim % 2 or spec.head_dim > MAX_HEAD_DIM:
        out.append(f"head_dim {spec.head_dim}: the kernels need an even d <= {MAX_HEAD_DIM}")
    if not (_pow2(plan.block_size) and plan.block_size <= 256):
        out.append(f"block_size {plan.block_size}: expected a power of two in 1..256")
    if plan.num_blocks < 1:
        out.append("num_blocks must be >= 1")
    if plan.kv_dtype not in ("f32", "bf16", "f16"):
        out.append(f"kv_dtype {plan.kv_dtype}: expected f32, bf16 or f16")
    if plan.weight_dtype not in ("f32", "bf16", "f16"):
        out.append(f"weight_dtype {plan.weight_dtype}: expected f32, bf16 or f16")
    if target in NEURON_TARGETS:
        if spec.n_embd % 128:
            out.append(f"attention_block_tkg: hidden size {spec.n_embd} is not a multiple of 128")
        if plan.block_size > 128:
            out.append(f"block_size {plan.block_size} > 128 (one SBUF partition per token)")
        if spec.rope_layout == "halves" and spec.rope_dim != spec.head_dim:
            out.append("attention_block_tkg: half-split RoPE needs rope_dim == head_dim")
    return out


def check(spec, plan, target):
    """Raises PlanError listing every broken constraint; a plan needs both phases."""
    problems = [f"model: {p}" for p in model_violations(spec, plan, target)]
    seen = set()
    for b in plan.buckets:
        if b.id in seen:
            problems.append(f"{b.id}: duplicate bucket")
        seen.add(b.id)
        problems += [f"{b.id}: {p}" for p in bucket_violations(spec, plan, b, target)]
    if not plan.prefill() or not plan.decode():
        problems.append("the plan needs at least one prefill and one decode bucket")
    if problems:
        raise PlanError("bucket plan rejected:\n  " + "\n  ".join(problems))
