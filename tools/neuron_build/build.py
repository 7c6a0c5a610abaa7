"""``python3 -m tools.neuron_build``: model -> DIR/manifest.json + weights/ + programs/.

Steps: read the model (GGUF or HF directory), plan and check the buckets, export the weights in
the backend's layout, trace (cpu-reference) or compile (Neuron) one program per bucket, write
and validate the manifest. Progress goes to stderr; ``--json`` prints a summary on stdout.
Exit codes: 0 built, 1 failed, 2 bad arguments or a rejected bucket plan, 3 the Neuron
toolchain is missing.
"""
import argparse
import json
import os
import sys
import tempfile
import time

from . import buckets
from . import manifest as mf
from . import model_source
from . import weights as wt

DESCRIPTION = """Builds Neuron artifacts (manifest.json, weights, one program per bucket) for
Pagoda's `backend.type: neuron`. --target cpu-reference writes TorchScript programs (in NEFF
headers) that the test runtime executes; trn1 / trn2 / inf2 compile NEFFs with AWS's
toolchain (torch-neuronx, neuronx-cc, NKI), which must be installed."""


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m tools.neuron_build", description=DESCRIPTION)
    p.add_argument("--model", required=True, help="GGUF file or Hugging Face directory")
    p.add_argument("--out", required=True, help="output directory (created)")
    p.add_argument("--target", required=True, choices=buckets.TARGETS)
    p.add_argument("--buckets", help="bucket plan YAML (see buckets.py); default: planned")
    p.add_argument("--lnc", type=int, default=None,
                   help="logical NeuronCore config the programs are compiled for (default: 2 on "
                        "trn2, else 1); must equal the server's neuron.logical_nc_config")
    p.add_argument("--tp", type=int, default=1,
                   help="tensor parallel degree (only 1: the backend runs one logical core)")
    p.add_argument("--num-blocks", type=int, help="override the plan's KV pool size")
    p.add_argument("--block-size", type=int, help="override the plan's KV block size")
    p.add_argument("--kv-dtype", choices=("f32", "bf16", "f16"), help="override the KV dtype")
    p.add_argument("--weight-dtype", choices=("f32", "bf16", "f16"),
                   help="override the weight dtype")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    args = p.parse_args(argv)
    if args.tp != 1:
        p.error("--tp: only 1 is supported (the Neuron backend runs one logical core, TP = 1)")
    if args.lnc is None:
        args.lnc = 2 if args.target == "trn2" else 1
    if args.lnc not in (1, 2):
        p.error("--lnc: expected 1 or 2")
    return args


class Progress:
    def __init__(self, quiet):
        self.quiet, self.start = quiet, time.time()

    def __call__(self, message):
        if not self.quiet:
            print(f"[neuron_build {time.time() - self.start:6.1f}s] {message}", file=sys.stderr,
                  flush=True)


def build(args, progress):
    """Builds everything; returns the summary dict."""
    progress(f"reading {args.model}")
    spec, logical = model_source.load_model(args.model)
    progress(f"model: {spec.architecture} ({spec.source_format}), {spec.n_layers} layers, "
             f"{spec.n_heads}/{spec.n_kv_heads} heads x {spec.head_dim}, vocab "
             f"{spec.vocab_size}, rope {spec.rope_layout}/{spec.rope_scaling}")
    plan = buckets.load_plan(spec, args.target, args.buckets,
                             {"num_blocks": args.num_blocks, "block_size": args.block_size,
                              "kv_dtype": args.kv_dtype, "weight_dtype": args.weight_dtype})
    progress(f"plan: {len(plan.buckets)} buckets, KV {plan.num_blocks} blocks x "
             f"{plan.block_size} {plan.kv_dtype}, weights {plan.weight_dtype}")
    os.makedirs(os.path.join(args.out, "programs"), exist_ok=True)
    tensors = wt.backend_weights(spec, logical)
    entries = wt.export_weights(args.out, tensors, plan.weight_dtype,
                                progress if not args.quiet and len(tensors) < 40 else None)
    progress(f"weights: {len(entries)} tensors written")
    programs = [mf.program_entry(b, f"programs/{b.id}.neff") for b in plan.buckets]
    compiler = _compiler_name(args.target)
    manifest = mf.build_manifest(spec, plan, args.target, args.lnc, compiler, entries, programs,
                                 extra={"tool": "tools/neuron_build", "tp": args.tp})
    _build_programs(args, spec, manifest, tensors, progress)
    path = mf.write_manifest(args.out, manifest)
    progress(f"wrote {path}")
    return {"manifest": os.path.abspath(path), "target": args.target, "lnc": args.lnc,
            "programs": [p["id"] for p in programs], "weights": len(entries),
            "kv_cache": manifest["kv_cache"]}


def _compiler_name(target):
    if target == "cpu-reference":
        import torch

        return f"torch {torch.__version__} (TorchScript, cpu-reference)"
    from . import neuron

    return neuron.compiler_version()


def _build_programs(args, spec, manifest, tensors, progress):
    from . import programs as prog

    weights = {e["name"]: prog.to_torch(tensors[e["name"]], e["dtype"])
               for e in manifest["weights"]["tensors"]}
    for p in manifest["programs"]:
        path = os.path.join(args.out, p["neff"])
        if args.target == "cpu-reference":
            traced = prog.trace(spec, manifest, p, weights)
            prog.save_torchscript_neff(path, traced, manifest, p)
        else:
            _compile_neuron(args, spec, manifest, p, weights, path)
        progress(f"program {p['id']}: {os.path.getsize(path)} bytes")


def _compile_neuron(args, spec, manifest, p, weights, path):
    from . import model as model_def
    from . import neuron
    from . import programs as prog

    names = [w["name"] for w in manifest["weights"]["tensors"]]
    module = model_def.DecoderStep(spec, prog.shape_of(p), names, kernels=neuron.NkiKernels())
    example = tuple(prog.example_inputs(manifest, p, weights))
    with tempfile.TemporaryDirectory() as work:
        neff = neuron.compile_program(module, example, args.target, args.lnc, work)
    with open(path, "wb") as f:
        f.write(neff)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    progress = Progress(args.quiet)
    try:
        summary = build(args, progress)
    except (buckets.PlanError, model_source.ModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - reported, with the Neuron case named
        from . import neuron

        if isinstance(e, neuron.NeuronUnavailable):
            print(f"error: {e}", file=sys.stderr)
            return 3
        raise
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0
