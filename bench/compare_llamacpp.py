#!/usr/bin/env python3
"""Pagoda against llama.cpp on the same GGUF files, in the same minutes.

llama.cpp runs through node-llama-cpp (bench/llamacpp/llamacpp_bench.mjs): the npm package ships
llama.cpp's CPU backends prebuilt for each x86 generation (no compiler or download at run time
beyond the one `npm install`, pinned, into --node-dir). For every round and model the two
engines run back to back, the order flipping each round (A B, then B A), each in its own process:

  decode:  pagoda bench model --prompt-len P --gen-len G -r 1 --interleave-bandwidth, then
           llama.cpp with the same lengths, bracketed by two `pagoda bench limits` read-bandwidth
           readings (llama.cpp cannot interleave the read loop between its steps);
  prefill: --prompt-len PREFILL --gen-len 2 for both (with --prefill-len > 0).

Prints a table of the medians over the rounds and the per-round ratios (same-minute pairs), or
with --json every run. Usage:
  compare_llamacpp.py [--pagoda build/bin/pagoda] [--node-dir build/llamacpp] [--rounds 3]
                      [--prompt-len 128] [--gen-len 64] [--prefill-len 512] [--json] MODEL...
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

NODE_LLAMA_CPP_VERSION = "3.22.1"  # pinned: llama.cpp v0.5.0 (ggml 0.25.1)
HERE = os.path.dirname(os.path.abspath(__file__))


def install(node_dir):
    """npm-installs node-llama-cpp@NODE_LLAMA_CPP_VERSION under node_dir (once), and puts a copy
    of llamacpp_bench.mjs beside its node_modules: an ES module finds its imports there
    (NODE_PATH does not apply to imports)."""
    os.makedirs(node_dir, exist_ok=True)
    shutil.copyfile(os.path.join(HERE, "llamacpp", "llamacpp_bench.mjs"),
                    os.path.join(node_dir, "llamacpp_bench.mjs"))
    pkg = os.path.join(node_dir, "node_modules", "node-llama-cpp", "package.json")
    try:
        with open(pkg) as f:
            if json.load(f)["version"] == NODE_LLAMA_CPP_VERSION:
                return
    except (OSError, ValueError, KeyError):
        pass
    print(f"installing node-llama-cpp@{NODE_LLAMA_CPP_VERSION} into {node_dir}", file=sys.stderr)
    # --ignore-scripts: the prebuilt binaries come with the package; its postinstall would only
    # look for a GPU toolchain to build against. --omit=optional and the x64 CPU binaries by
    # name: 85 MB instead of 725 MB of CUDA, Vulkan and ARM builds.
    subprocess.run(["npm", "install", "--prefix", node_dir, "--no-audit", "--no-fund",
                    "--ignore-scripts", "--save-exact", "--omit=optional",
                    f"node-llama-cpp@{NODE_LLAMA_CPP_VERSION}",
                    f"@node-llama-cpp/linux-x64@{NODE_LLAMA_CPP_VERSION}"], check=True, timeout=600,
                   stdout=sys.stderr)


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800)
    return json.loads(out.stdout)


def pagoda_run(args, model, prompt_len, gen_len):
    cmd = [args.pagoda, "bench", "model", "-m", model, "--prompt-len", str(prompt_len),
           "--gen-len", str(gen_len), "-r", "1", "--json"]
    if gen_len > 2:
        cmd.append("--interleave-bandwidth")
    d = run_json(cmd)
    return {"prefill_tokens_per_s": d["prefill_tokens_per_s"],
            "decode_tokens_per_s": d["decode_tokens_per_s"],
            "read_gbps": d.get("interleaved_read_bandwidth_gbps"),
            "decode_fraction_of_interleaved_bandwidth":
                d.get("decode_fraction_of_interleaved_bandwidth")}


def read_gbps(args):
    return run_json([args.pagoda, "bench", "limits", "--json"])["read_bandwidth_gbps"]


def llamacpp_run(args, model, prompt_len, gen_len):
    before = read_gbps(args) if gen_len > 2 else None
    script = os.path.join(args.node_dir, "llamacpp_bench.mjs")  # install()'s copy
    d = run_json(["node", script, "--model", model, "--prompt-len", str(prompt_len),
                  "--gen-len", str(gen_len)])
    after = read_gbps(args) if gen_len > 2 else None
    d["read_gbps"] = None if before is None else (before + after) / 2
    return d


def one_round(args, model, flip):
    engines = [pagoda_run, llamacpp_run]
    if flip:
        engines.reverse()
    out = {}
    for run in engines:
        name = "pagoda" if run is pagoda_run else "llama.cpp"
        out[name] = {"decode": run(args, model, args.prompt_len, args.gen_len)}
        if args.prefill_len > 0:
            out[name]["prefill"] = run(args, model, args.prefill_len, 2)
    return out


def summarize(model, rounds):
    row = {"model": os.path.basename(model)}
    for engine in ("pagoda", "llama.cpp"):
        dec = [r[engine]["decode"]["decode_tokens_per_s"] for r in rounds]
        row[engine + "_decode"] = statistics.median(dec)
        if "prefill" in rounds[0][engine]:
            row[engine + "_prefill"] = statistics.median(
                r[engine]["prefill"]["prefill_tokens_per_s"] for r in rounds)
    row["decode_ratios"] = [r["pagoda"]["decode"]["decode_tokens_per_s"] /
                            r["llama.cpp"]["decode"]["decode_tokens_per_s"] for r in rounds]
    if "prefill" in rounds[0]["pagoda"]:
        row["prefill_ratios"] = [r["pagoda"]["prefill"]["prefill_tokens_per_s"] /
                                 r["llama.cpp"]["prefill"]["prefill_tokens_per_s"] for r in rounds]
    row["read_gbps"] = [(r["pagoda"]["decode"]["read_gbps"], r["llama.cpp"]["decode"]["read_gbps"])
                        for r in rounds]
    return row


def print_table(rows):
    print("| model | decode tok/s Pagoda / llama.cpp (median) | per-round ratio | read GB/s "
          "(Pagoda interleaved / around llama.cpp) | prefill tok/s Pagoda / llama.cpp | ratio |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        ratios = ", ".join(f"{x:.2f}" for x in r["decode_ratios"])
        bw = ", ".join(f"{a:.0f} / {b:.0f}" for a, b in r["read_gbps"])
        pre = pre_ratio = "-"
        if "pagoda_prefill" in r:
            pre = f"{r['pagoda_prefill']:.1f} / {r['llama.cpp_prefill']:.1f}"
            pre_ratio = ", ".join(f"{x:.2f}" for x in r["prefill_ratios"])
        print(f"| {r['model']} | {r['pagoda_decode']:.1f} / {r['llama.cpp_decode']:.1f} | "
              f"{ratios} | {bw} | {pre} | {pre_ratio} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="GGUF files")
    ap.add_argument("--pagoda", default="build/bin/pagoda")
    ap.add_argument("--node-dir", default="build/llamacpp",
                    help="where node-llama-cpp is installed (npm, once)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--prefill-len", type=int, default=512, help="0: no prefill runs")
    ap.add_argument("--json", action="store_true", help="print every run as JSON")
    args = ap.parse_args()
    for m in args.models:
        if not os.path.isfile(m):
            ap.error(f"model: {m} is not a file")
    if args.rounds < 1 or args.gen_len < 3 or args.prompt_len < 2:
        ap.error("expected --rounds >= 1, --gen-len >= 3, --prompt-len >= 2")
    args.node_dir = os.path.abspath(args.node_dir)
    install(args.node_dir)
    results = {m: [] for m in args.models}
    for i in range(args.rounds):
        for m in args.models:
            print(f"round {i + 1}/{args.rounds}: {os.path.basename(m)}", file=sys.stderr)
            results[m].append(one_round(args, m, flip=i % 2 == 1))
    rows = [summarize(m, rounds) for m, rounds in results.items()]
    if args.json:
        print(json.dumps({"node_llama_cpp_version": NODE_LLAMA_CPP_VERSION, "rows": rows,
                          "runs": results}, indent=2))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
