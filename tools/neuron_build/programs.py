"""Programs: tracing the model definition per bucket and loading the result.

cpu-reference: ``torch.jit.trace`` of ``model.DecoderStep`` with the reference kernels, saved
as TorchScript and wrapped in a NEFF header (name ``pagoda-torchscript:<program id>``, the
manifest's LNC). The archive carries ``pagoda_io.json``: the program's manifest entry and its
tensors in argument order (``manifest.program_io``), which the fake libnrt's TorchScript mode
(tests/kernels/neuron) reports as the program's tensor info and binds by name.
"""
import io
import json

import numpy as np
import torch

from . import manifest as mf
from . import model as model_def

TORCH_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
                "i32": torch.int32, "i64": torch.int64}
IO_FILE = "pagoda_io.json"


def shape_of(program):
    """model.ProgramShape of a manifest program entry."""
    if program["phase"] == "prefill":
        return model_def.ProgramShape("prefill", program["max_tokens"], 1, 1,
                                      program["max_ctx_blocks"])
    rows, tps = program["max_seqs"], program.get("tokens_per_seq", 1)
    return model_def.ProgramShape("decode", rows * tps, rows, tps, program["max_ctx_blocks"])


def to_torch(array, dtype):
    """A float32 numpy array as a torch tensor of manifest dtype `dtype`."""
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(TORCH_DTYPES[dtype])


def example_inputs(manifest, program, weights):
    """Arguments for tracing: one real sequence row plus padding, scratch KV pools (tracing
    runs the program once, so it must not touch the real pools) and the weights."""
    specs = mf.program_io(manifest, program)
    shape = shape_of(program)
    args = []
    for s in specs:
        if s["usage"] == "output":
            continue
        if s.get("state"):
            args.append(torch.zeros(s["shape"], dtype=TORCH_DTYPES[s["dtype"]]))
        elif s["name"] in weights:
            args.append(weights[s["name"]])
        else:
            args.append(torch.zeros(s["shape"], dtype=torch.int32))
    ids, pos, slots, table, ctx = args[:5]
    n = 1 if shape.phase == "decode" else min(3, shape.tokens)
    pos[:n] = torch.arange(2, 2 + n, dtype=torch.int32)
    slots.fill_(-1)
    slots[:n] = pos[:n]
    table.fill_(-1)
    table[0, 0] = 0
    ctx[0] = 2 + n
    return args


def trace(spec, manifest, program, weights, kernels=None):
    """The traced program (torch.jit.ScriptModule) of one manifest entry."""
    names = [w["name"] for w in manifest["weights"]["tensors"]]
    module = model_def.DecoderStep(spec, shape_of(program), names,
                                   **({"kernels": kernels} if kernels else {}))
    module.eval()
    with torch.no_grad():
        return torch.jit.trace(module, tuple(example_inputs(manifest, program, weights)),
                               check_trace=False)


def io_description(manifest, program):
    return {"program": program, "block_size": manifest["kv_cache"]["block_size"],
            "slot_pad": manifest["kv_cache"]["slot_pad"],
            "tensors": mf.program_io(manifest, program)}


def save_torchscript_neff(path, traced, manifest, program):
    """Writes the NEFF-header-wrapped TorchScript archive of `traced` to `path`."""
    buf = io.BytesIO()
    extra = {IO_FILE: json.dumps(io_description(manifest, program))}
    torch.jit.save(traced, buf, _extra_files=extra)
    header = mf.neff_header(mf.TORCHSCRIPT_PREFIX + program["id"], manifest["lnc"])
    with open(path, "wb") as f:
        f.write(header)
        f.write(buf.getvalue())


def load_torchscript_neff(path):
    """(ScriptModule, io description) of a cpu-reference program file."""
    with open(path, "rb") as f:
        data = f.read()
    name, _ = mf.parse_neff_header(data)
    if not name.startswith(mf.TORCHSCRIPT_PREFIX):
        raise ValueError(f"{path}: not a cpu-reference program (NEFF name '{name}')")
    extra = {IO_FILE: ""}
    module = torch.jit.load(io.BytesIO(data[mf.NEFF_HEADER_SIZE:]), _extra_files=extra)
    return module, json.loads(extra[IO_FILE])
