"""Hugging Face model directories: ``config.json`` and safetensors shards.

The safetensors format is an 8-byte little-endian header length, a JSON header mapping each
tensor name to ``{dtype, shape, data_offsets}`` (offsets relative to the end of the header),
then the data. F32, F16 and BF16 tensors are read (the types Pagoda's HF loader computes with
unquantized); tensors are returned as float32 numpy arrays.
"""
import glob
import json
import os
import struct

import numpy as np

_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "bf16"}


class HfError(ValueError):
    """A malformed or unsupported Hugging Face directory."""


class SafetensorsSet:
    """Every ``*.safetensors`` file of a directory, indexed by tensor name."""

    def __init__(self, directory):
        self.directory = directory
        self.index = {}  # name -> (path, dtype, shape, start, end)
        files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
        if not files:
            raise HfError(f"{directory}: no *.safetensors files")
        for path in files:
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                start, end = info["data_offsets"]
                self.index[name] = (path, info["dtype"], info["shape"], 8 + n + start, 8 + n + end)

    def __contains__(self, name):
        return name in self.index

    def tensor(self, name):
        """Tensor `name` as float32, in its stored (row-major) shape."""
        if name not in self.index:
            raise HfError(f"{self.directory}: tensor '{name}' is missing")
        path, dtype, shape, start, end = self.index[name]
        if dtype not in _DTYPES:
            raise HfError(f"tensor '{name}': dtype {dtype} is not supported (F32, F16, BF16)")
        with open(path, "rb") as f:
            f.seek(start)
            raw = f.read(end - start)
        if dtype == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32)
        else:
            values = np.frombuffer(raw, dtype=_DTYPES[dtype]).astype(np.float32)
        return values.reshape(shape)


def read_config(directory):
    """``config.json`` (and ``generation_config.json`` if present) of an HF directory."""
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        raise HfError(f"{directory}: config.json is missing")
    with open(path) as f:
        config = json.load(f)
    return config
