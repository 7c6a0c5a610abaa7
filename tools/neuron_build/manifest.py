"""The artifact manifest (``pagoda-neuron-manifest/1``) and the NEFF header.

``build_manifest`` writes exactly what ``kernels/neuron/manifest.cc`` parses and
``ExpectedTensors`` (kernels/neuron/tensor_spec.cc) expects of every program; ``validate``
re-checks a manifest with the same rules as the C++ parser (the C++ side stays the reference:
the tests also run ``pagoda inspect --neuron-manifest``). ``program_io`` is the I/O contract of
one program, in the order the traced programs take their arguments.

``neff_header`` is the 1024-byte NEFF header Pagoda reads before ``nrt_load``
(docs/neuron-backend.md 3): the NUL-terminated name at offset 220 and the little-endian u32
``lnc_size`` at 552. cpu-reference programs are that header followed by a TorchScript archive.
"""
import json
import os
import struct

FORMAT = "pagoda-neuron-manifest/1"
KV_LAYOUT = "[2][num_blocks][n_kv_heads][block_size][head_dim]"
IO_ROLES = ("input_ids", "position_ids", "slot_mapping", "block_table", "context_lens", "logits")
K_NAME, V_NAME = "kv.{layer}.k", "kv.{layer}.v"
SLOT_PAD = TABLE_PAD = -1
MAX_TOKENS_PER_SEQ = 8
WEIGHT_DTYPES = ("f32", "bf16", "f16", "fp8_e4m3", "i32", "i64", "u8", "i8", "u32")

NEFF_HEADER_SIZE, NEFF_NAME_OFFSET, NEFF_NAME_SIZE, NEFF_LNC_OFFSET = 1024, 220, 256, 552
TORCHSCRIPT_PREFIX = "pagoda-torchscript:"


class ManifestError(ValueError):
    """A manifest that the backend would refuse."""


def program_entry(bucket, neff):
    """One ``programs[]`` entry for a Bucket (buckets.py)."""
    entry = {"id": bucket.id, "phase": bucket.phase, "neff": neff,
             "max_ctx_blocks": bucket.ctx_blocks, "io": {r: r for r in IO_ROLES}}
    if bucket.phase == "prefill":
        entry["max_tokens"] = bucket.tokens
        entry["kernel"] = "flash_paged_attention"
    else:
        entry["max_seqs"] = bucket.seqs
        entry["tokens_per_seq"] = bucket.tokens_per_seq
        entry["kernel"] = "attention_block_tkg"
    return entry


def build_manifest(spec, plan, target, lnc, compiler, weight_entries, programs, extra=None):
    """The manifest dict. `programs` are ``program_entry`` results; `weight_entries` come from
    weights.export_weights. Keys the parser does not read (``kernel``, ``builder``) are
    informational."""
    m = {"format": FORMAT, "target": target, "lnc": lnc, "compiler": compiler,
         "model": {"arch": spec.architecture, "n_layers": spec.n_layers,
                   "vocab": spec.vocab_size, "n_kv_heads": spec.n_kv_heads,
                   "head_dim": spec.head_dim, "n_heads": spec.n_heads, "n_embd": spec.n_embd,
                   "rope_layout": spec.rope_layout, "rope_scaling": spec.rope_scaling,
                   "sliding_window": spec.sliding_window, "source": spec.source},
         "kv_cache": {"layout": KV_LAYOUT, "num_blocks": plan.num_blocks,
                      "block_size": plan.block_size, "dtype": plan.kv_dtype,
                      "tensor_names": {"k": K_NAME, "v": V_NAME}, "slot_pad": SLOT_PAD,
                      "table_pad": TABLE_PAD},
         "weights": {"mode": "separate", "tensors": weight_entries},
         "programs": programs}
    if extra:
        m["builder"] = extra
    validate(m)
    return m


def write_manifest(out_dir, manifest):
    path = os.path.join(out_dir, "manifest.json")
    with open(path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return path


def _need(obj, key, where, kind):
    if not isinstance(obj, dict) or key not in obj or obj[key] is None:
        raise ManifestError(f"{where}{key}: missing")
    value = obj[key]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise ManifestError(f"{where}{key}: wrong type ({json.dumps(value)})")
    return value


def validate(m):
    """The C++ parser's rules (ParseManifest); raises ManifestError naming the key."""
    if _need(m, "format", "", str) != FORMAT:
        raise ManifestError(f"format: expected \"{FORMAT}\"")
    _need(m, "target", "", str)
    _need(m, "lnc", "", int)
    for key in ("arch",):
        _need(m.get("model"), key, "model.", str)
    for key in ("n_layers", "vocab", "n_kv_heads", "head_dim"):
        _need(m.get("model"), key, "model.", int)
    kv = m.get("kv_cache")
    if _need(kv, "layout", "kv_cache.", str) != KV_LAYOUT:
        raise ManifestError(f"kv_cache.layout: expected {KV_LAYOUT}")
    if _need(kv, "num_blocks", "kv_cache.", int) < 1:
        raise ManifestError("kv_cache.num_blocks: must be >= 1")
    bs = _need(kv, "block_size", "kv_cache.", int)
    if not (1 <= bs <= 256 and bs & (bs - 1) == 0):
        raise ManifestError("kv_cache.block_size: expected a power of two in 1..256")
    if _need(kv, "dtype", "kv_cache.", str) not in ("f32", "bf16", "f16", "fp8_e4m3"):
        raise ManifestError("kv_cache.dtype: expected f32, bf16, f16 or fp8_e4m3")
    _need(kv.get("tensor_names"), "k", "kv_cache.tensor_names.", str)
    _need(kv.get("tensor_names"), "v", "kv_cache.tensor_names.", str)
    _validate_weights(m.get("weights"))
    programs = m.get("programs")
    if not isinstance(programs, list) or not programs:
        raise ManifestError("programs: missing or empty")
    ids = set()
    for i, p in enumerate(programs):
        _validate_program(p, f"programs[{i}].")
        if p["id"] in ids:
            raise ManifestError(f"programs[{i}].id: duplicate")
        ids.add(p["id"])
    phases = {p["phase"] for p in programs}
    if phases != {"prefill", "decode"}:
        raise ManifestError("needs at least one prefill and one decode program")


def _validate_weights(w):
    mode = _need(w, "mode", "weights.", str)
    if mode == "embedded":
        return
    if mode != "separate":
        raise ManifestError("weights.mode: expected embedded or separate")
    if not isinstance(w.get("tensors"), list):
        raise ManifestError("weights.tensors: missing (a list of {name, file, dtype, shape})")
    for i, t in enumerate(w["tensors"]):
        where = f"weights.tensors[{i}]."
        for key in ("name", "file", "dtype"):
            _need(t, key, where, str)
        _need(t, "shape", where, list)
        if t["dtype"] not in WEIGHT_DTYPES:
            raise ManifestError(f"{where}dtype: unknown \"{t['dtype']}\"")


def _validate_program(p, w):
    for key in ("id", "phase", "neff"):
        _need(p, key, w, str)
    if _need(p, "max_ctx_blocks", w, int) < 1:
        raise ManifestError(f"{w}max_ctx_blocks: must be >= 1")
    if p["phase"] == "prefill":
        if _need(p, "max_tokens", w, int) < 1:
            raise ManifestError(f"{w}max_tokens: must be >= 1")
        if p.get("max_seqs", 1) != 1:
            raise ManifestError(f"{w}max_seqs: prefill programs take 1 sequence")
    elif p["phase"] == "decode":
        if _need(p, "max_seqs", w, int) < 1:
            raise ManifestError(f"{w}max_seqs: must be >= 1")
        tps = p.get("tokens_per_seq", 1)
        if not isinstance(tps, int) or not 1 <= tps <= MAX_TOKENS_PER_SEQ:
            raise ManifestError(f"{w}tokens_per_seq: expected 1..{MAX_TOKENS_PER_SEQ} (the TKG "
                                f"kernel's limit), got {tps}")
    else:
        raise ManifestError(f"{w}phase: expected prefill or decode, got \"{p['phase']}\"")
    io = _need(p, "io", w, dict)
    for role in IO_ROLES:
        if role not in io:
            raise ManifestError(f"{w}io.{role}: missing")


def program_io(manifest, program):
    """The program's tensors in argument order (ExpectedTensors): the five per-step inputs,
    every layer's K and V (state: updated in place), the weights; then the logits output.
    Each is {name, usage, dtype, shape}."""
    decode = program["phase"] == "decode"
    rows = program["max_seqs"] if decode else 1
    tokens = rows * program.get("tokens_per_seq", 1) if decode else program["max_tokens"]
    logit_rows = tokens if decode else 1
    io, kv = program["io"], manifest["kv_cache"]

    def t(role, shape, usage="input", dtype="i32"):
        return {"name": io[role], "role": role, "usage": usage, "dtype": dtype, "shape": shape}

    specs = [t("input_ids", [tokens]), t("position_ids", [tokens]), t("slot_mapping", [tokens]),
             t("block_table", [rows, program["max_ctx_blocks"]]), t("context_lens", [rows])]
    md = manifest["model"]
    kv_shape = [kv["num_blocks"], md["n_kv_heads"], kv["block_size"], md["head_dim"]]
    for layer in range(md["n_layers"]):
        for tmpl in (kv["tensor_names"]["k"], kv["tensor_names"]["v"]):
            specs.append({"name": tmpl.replace("{layer}", str(layer)), "usage": "input",
                          "state": True, "dtype": kv["dtype"], "shape": kv_shape})
    for w in manifest["weights"].get("tensors", []):
        specs.append({"name": w["name"], "usage": "input", "dtype": w["dtype"],
                      "shape": w["shape"]})
    specs.append(t("logits", [logit_rows, md["vocab"]], usage="output", dtype="f32"))
    return specs


def neff_header(name, lnc):
    """A 1024-byte NEFF header carrying `name` and `lnc` where Pagoda reads them."""
    raw = name.encode()
    if len(raw) >= NEFF_NAME_SIZE:
        raise ValueError(f"program name '{name}' longer than {NEFF_NAME_SIZE - 1} bytes")
    header = bytearray(NEFF_HEADER_SIZE)
    header[NEFF_NAME_OFFSET:NEFF_NAME_OFFSET + len(raw)] = raw
    struct.pack_into("<I", header, NEFF_LNC_OFFSET, lnc)
    return bytes(header)


def parse_neff_header(data):
    """(name, lnc_size) of a NEFF header; ValueError if shorter than 1024 bytes."""
    if len(data) < NEFF_HEADER_SIZE:
        raise ValueError(f"{len(data)} bytes, shorter than the 1024-byte NEFF header")
    name = bytes(data[NEFF_NAME_OFFSET:NEFF_NAME_OFFSET + NEFF_NAME_SIZE]).split(b"\0")[0]
    (lnc,) = struct.unpack_from("<I", data, NEFF_LNC_OFFSET)
    return name.decode(errors="replace"), lnc
