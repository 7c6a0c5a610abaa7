#!/usr/bin/python3
"""Writes small seed inputs for the fuzz targets into OUT_DIR/<target>/ (at build time).

The seeds are tiny on purpose: a fuzzer mutates faster on small inputs. The GGUF seed keeps the
metadata of a real model (any llama GGUF given with --gguf, e.g. ../shared's aidreams260K) but
shrinks every dimension and writes seeded random weights (F32, F16 and Q8_0 tensors), so the
loader's whole path (metadata, tensor table, weight binding, tokenizer) is reachable. The
safetensors seeds are a two-tensor file and an index. Larger real files from ../shared are
copied beside these by the build (see CMakeLists.txt).

  make_seeds.py --gguf MODEL.gguf --out DIR
"""
import argparse
import json
import os
import random
import struct

# GGUF value types (gguf spec): 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
# 8 string, 9 array, 10 u64, 11 i64, 12 f64.
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}


def _read_str(b, at):
    (n,) = struct.unpack_from("<Q", b, at)
    return b[at + 8:at + 8 + n].decode("utf-8", "surrogateescape"), at + 8 + n


def _read_value(b, at, t):
    if t in _SCALAR:
        (v,) = struct.unpack_from(_SCALAR[t], b, at)
        return v, at + struct.calcsize(_SCALAR[t])
    if t == 8:
        return _read_str(b, at)
    if t == 9:
        et, n = struct.unpack_from("<IQ", b, at)
        at += 12
        vals = []
        for _ in range(n):
            v, at = _read_value(b, at, et)
            vals.append(v)
        return (et, vals), at
    raise ValueError(f"unknown GGUF value type {t}")


def read_gguf_metadata(path):
    """[(key, type, value)] of a GGUF v2/v3 file (tensors are not read)."""
    b = open(path, "rb").read()
    magic, version, _n_tensors, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    assert magic == b"GGUF" and version in (2, 3), path
    at, kvs = 24, []
    for _ in range(n_kv):
        key, at = _read_str(b, at)
        (t,) = struct.unpack_from("<I", b, at)
        v, at = _read_value(b, at + 4, t)
        kvs.append((key, t, v))
    return kvs


def _write_str(s):
    raw = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(raw)) + raw


def _write_value(t, v):
    if t in _SCALAR:
        return struct.pack(_SCALAR[t], v)
    if t == 8:
        return _write_str(v)
    et, vals = v
    return struct.pack("<IQ", et, len(vals)) + b"".join(_write_value(et, x) for x in vals)


def _f16(x):
    return struct.pack("<e", x)


def _q8_0(values):
    """ggml block_q8_0: per 32 values an f16 scale d = max|x| / 127 and 32 int8 quants."""
    out = b""
    for i in range(0, len(values), 32):
        block = values[i:i + 32]
        d = max(abs(x) for x in block) / 127 or 1.0
        q = [max(-127, min(127, round(x / d))) for x in block]
        out += _f16(d) + struct.pack(f"<{len(q)}b", *q)
    return out


def write_tiny_gguf(path, source_kvs, rng):
    """A one-layer llama with n_embd 32 (so Q8_0 rows of 32 fit), keeping the tokenizer."""
    arch = next(v for k, _, v in source_kvs if k == "general.architecture")
    n_vocab = len(next(v for k, _, v in source_kvs if k == "tokenizer.ggml.tokens")[1])
    dims = {"context_length": 64, "embedding_length": 32, "block_count": 1,
            "feed_forward_length": 64, "attention.head_count": 4, "attention.head_count_kv": 2,
            "rope.dimension_count": 8}
    kvs = []
    for key, t, v in source_kvs:
        suffix = key[len(arch) + 1:] if key.startswith(arch + ".") else None
        if suffix in dims:
            v = dims[suffix]
        kvs.append((key, t, v))
    e, f = dims["embedding_length"], dims["feed_forward_length"]
    kv_dim = e // dims["attention.head_count"] * dims["attention.head_count_kv"]
    # (name, ggml dims [ne0, ne1], ggml type: 0 F32, 1 F16, 8 Q8_0)
    tensors = [("token_embd.weight", [e, n_vocab], 8), ("output_norm.weight", [e], 0),
               ("output.weight", [e, n_vocab], 1), ("blk.0.attn_norm.weight", [e], 0),
               ("blk.0.attn_q.weight", [e, e], 8), ("blk.0.attn_k.weight", [e, kv_dim], 0),
               ("blk.0.attn_v.weight", [e, kv_dim], 1), ("blk.0.attn_output.weight", [e, e], 8),
               ("blk.0.ffn_norm.weight", [e], 0), ("blk.0.ffn_gate.weight", [e, f], 8),
               ("blk.0.ffn_up.weight", [e, f], 0), ("blk.0.ffn_down.weight", [f, e], 1)]
    data, infos = b"", b""
    for name, shape, t in tensors:
        n = 1
        for d in shape:
            n *= d
        vals = [1.0] * n if name.endswith("norm.weight") else [rng.gauss(0, 0.2) for _ in range(n)]
        blob = {0: lambda: struct.pack(f"<{n}f", *vals), 1: lambda: b"".join(_f16(x) for x in vals),
                8: lambda: _q8_0(vals)}[t]()
        data += b"\0" * (-len(data) % 32)
        infos += _write_str(name) + struct.pack("<I", len(shape)) + \
            b"".join(struct.pack("<Q", d) for d in shape) + struct.pack("<IQ", t, len(data))
        data += blob
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    head += b"".join(_write_str(k) + struct.pack("<I", t) + _write_value(t, v) for k, t, v in kvs)
    head += infos
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as out:
        out.write(head + data)


def write_safetensors_seeds(out_dir, rng):
    """Seeds of the safetensors target: first byte 0 = a file image, 1 = an index JSON."""
    tensors = {"a.weight": ("F32", [2, 3]), "b.weight": ("F16", [4]), "c.bias": ("BF16", [2])}
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, (dtype, shape) in tensors.items():
        n = shape[0] * (shape[1] if len(shape) > 1 else 1)
        blob = struct.pack(f"<{n}f", *[rng.random() for _ in range(n)]) if dtype == "F32" \
            else bytes(rng.randrange(256) for _ in range(2 * n))
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out_dir, "file.bin"), "wb") as out:
        out.write(b"\0" + struct.pack("<Q", len(h)) + h + data)
    index = {"metadata": {"total_size": 64},
             "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                            "b.weight": "model-00002-of-00002.safetensors"}}
    with open(os.path.join(out_dir, "index.bin"), "wb") as out:
        out.write(b"\1" + json.dumps(index).encode())


def _varint(v):
    out = b""
    while True:
        b, v = v & 0x7F, v >> 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def _field(number, wire_type, payload):
    """One protobuf field: wire type 0 takes an int, 2 bytes, 5 a float."""
    tag = _varint(number << 3 | wire_type)
    if wire_type == 0:
        return tag + _varint(payload)
    if wire_type == 5:
        return tag + struct.pack("<f", payload)
    return tag + _varint(len(payload)) + payload


def write_tiny_spm(path):
    """A SentencePiece ModelProto (BPE with byte fallback): <unk>, <s>, </s>, the 256 byte
    pieces and a few merges' pieces."""
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    pieces += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    pieces += [(p, -float(i), 1) for i, p in enumerate(
        ["\u2581", "\u2581t", "he", "\u2581the", "o", "n", "\u2581o", "\u2581on", "ce"])]
    model = b"".join(_field(1, 2, _field(1, 2, p.encode()) + _field(2, 5, s) + _field(3, 0, t))
                     for p, s, t in pieces)
    trainer = _field(3, 0, 2) + _field(35, 0, 1) + _field(40, 0, 0) + _field(41, 0, 1) + \
        _field(42, 0, 2) + _field(44, 0, 0)
    normalizer = _field(1, 2, b"identity") + _field(3, 0, 1) + _field(4, 0, 0)
    with open(path, "wb") as out:
        out.write(model + _field(2, 2, trainer) + _field(3, 2, normalizer))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gguf", required=True, help="a llama GGUF whose metadata the seed keeps")
    p.add_argument("--out", required=True, help="corpus root; writes OUT/gguf, OUT/safetensors, OUT/tokenizer_model")
    args = p.parse_args()
    rng = random.Random(20261201)
    for sub in ("gguf", "safetensors", "tokenizer_model"):
        os.makedirs(os.path.join(args.out, sub), exist_ok=True)
    write_tiny_gguf(os.path.join(args.out, "gguf", "tiny-llama.gguf"),
                    read_gguf_metadata(args.gguf), rng)
    write_safetensors_seeds(os.path.join(args.out, "safetensors"), rng)
    write_tiny_spm(os.path.join(args.out, "tokenizer_model", "tiny-bpe.model"))


if __name__ == "__main__":
    main()
