"""A small GGUF reader: metadata, the tensor table and dequantized tensor data.

It follows the layout Pagoda's own reader accepts (model/gguf.cc): the magic ``GGUF``, version
2 or 3, a key/value metadata section, the tensor infos (name, dims ``ne`` with ``ne[0]`` the
fastest-varying, ggml type, offset) and the data section aligned to ``general.alignment``
(default 32). Tensor data is returned as float32 numpy arrays in row-major order, i.e. with the
shape ``ne`` reversed (a GGUF matrix ``ne = [cols, rows]`` becomes ``[rows, cols]``).

Only the types the builder dequantizes are supported: F32, F16, BF16 and Q8_0. Anything else is
an error naming the tensor and its type.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# ggml type ids (ggml.h) of the types this reader dequantizes, and a few names for messages.
F32, F16, Q8_0, BF16 = 0, 1, 8, 30
TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
              10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 20: "IQ4_NL",
              23: "IQ4_XS", 30: "BF16"}
Q8_0_BLOCK = 32  # values per Q8_0 block: an f16 scale, then 32 int8

# Metadata value types (gguf.md).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class GgufError(ValueError):
    """A malformed or unsupported GGUF file."""


class _Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise GgufError("truncated file")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self):
        n = self.take("<Q")
        if self.pos + n > len(self.data):
            raise GgufError("truncated string")
        s = bytes(self.data[self.pos:self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, n = self.take("<I"), self.take("<Q")
            return [self.value(etype) for _ in range(n)]
        raise GgufError(f"unknown metadata type {vtype}")


class GgufTensor:
    """One tensor of the table: name, ``ne`` (GGUF order), ggml type and its raw bytes."""

    def __init__(self, name, ne, ggml_type, raw):
        self.name, self.ne, self.type, self.raw = name, ne, ggml_type, raw

    @property
    def shape(self):
        """Row-major numpy shape (``ne`` reversed)."""
        return tuple(reversed(self.ne))

    @property
    def type_name(self):
        return TYPE_NAMES.get(self.type, f"type {self.type}")

    def numpy(self):
        """The tensor dequantized to float32, shaped ``self.shape``."""
        count = int(np.prod(self.ne)) if self.ne else 1
        if self.type == F32:
            out = np.frombuffer(self.raw, dtype="<f4", count=count)
        elif self.type == F16:
            out = np.frombuffer(self.raw, dtype="<f2", count=count).astype(np.float32)
        elif self.type == BF16:
            bits = np.frombuffer(self.raw, dtype="<u2", count=count).astype(np.uint32) << 16
            out = bits.view(np.float32)
        elif self.type == Q8_0:
            out = dequantize_q8_0(self.raw, count)
        else:
            raise GgufError(f"tensor '{self.name}': type {self.type_name} is not supported "
                            "(the builder dequantizes F32, F16, BF16 and Q8_0)")
        return np.array(out, dtype=np.float32).reshape(self.shape)


def dequantize_q8_0(raw, count):
    """Q8_0 blocks (f16 scale d, 32 x int8 q) -> float32 d * q, as ggml's dequantize_row_q8_0."""
    if count % Q8_0_BLOCK:
        raise GgufError(f"Q8_0 tensor of {count} values is not a multiple of {Q8_0_BLOCK}")
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("q", "i1", (Q8_0_BLOCK,))]),
                           count=count // Q8_0_BLOCK)
    return (blocks["d"].astype(np.float32)[:, None] * blocks["q"].astype(np.float32)).ravel()


def _tensor_bytes(ggml_type, ne):
    count = int(np.prod(ne)) if ne else 1
    if ggml_type == F32:
        return 4 * count
    if ggml_type in (F16, BF16):
        return 2 * count
    if ggml_type == Q8_0:
        return count // Q8_0_BLOCK * 34
    return None  # unknown size: only an error if the tensor is used


class GgufFile:
    """A parsed GGUF file: ``metadata`` (dict) and ``tensors`` (name -> GgufTensor)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            data = memoryview(f.read())
        r = _Reader(data)
        if bytes(data[:4]) != GGUF_MAGIC:
            raise GgufError(f"{path}: not a GGUF file (bad magic)")
        r.pos = 4
        self.version = r.take("<I")
        if self.version not in (2, 3):
            raise GgufError(f"{path}: GGUF version {self.version} (expected 2 or 3)")
        n_tensors, n_kv = r.take("<Q"), r.take("<Q")
        self.metadata = {}
        for _ in range(n_kv):
            key = r.string()
            self.metadata[key] = r.value(r.take("<I"))
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            ne = [r.take("<Q") for _ in range(r.take("<I"))]
            infos.append((name, ne, r.take("<I"), r.take("<Q")))
        align = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        base = (r.pos + align - 1) // align * align
        self.tensors = {}
        for name, ne, ggml_type, offset in infos:
            size = _tensor_bytes(ggml_type, ne)
            start = base + offset
            end = len(data) if size is None else start + size
            if end > len(data):
                raise GgufError(f"{path}: tensor '{name}' runs past the end of the file")
            self.tensors[name] = GgufTensor(name, ne, ggml_type, data[start:end])

    def get(self, key, default=None):
        return self.metadata.get(key, default)

    def tensor(self, name):
        """The dequantized float32 array of tensor `name` (GgufError if missing)."""
        if name not in self.tensors:
            raise GgufError(f"{self.path}: tensor '{name}' is missing")
        return self.tensors[name].numpy()
