#!/usr/bin/python3
"""Runs every libFuzzer target of a PAGODA_FUZZ build for a fixed time and reports executions.

  scripts/run_fuzz.py --build-dir build-fuzz --seconds 60 [--runs N] [--targets gguf,yaml] [--json]

Each target fuzzes from the build's seed corpus (fuzz-corpus/<name>, read-only) and its
committed crash inputs (tests/fuzz/regressions/<name>), writing new coverage inputs to
<build>/fuzz-work/<name> and crashes to <build>/fuzz-artifacts/<name>/. A target that crashes
makes the run fail; fix the bug, then copy the crash input into tests/fuzz/regressions/<name>/
so `make test` replays it from then on. With --runs N a target stops after N executions (or
--seconds, whichever comes first), the form of a "10^6 executions per target" run. Progress is printed per target; --json prints one
object per target ({target, seconds, executions, exec_per_second, crashed, artifacts}).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

# Largest input libFuzzer makes per target: big enough for the small seeds, small enough that
# mutations stay fast (larger seeds from ../shared are truncated to it).
MAX_LEN = {"gguf": 131072, "safetensors": 4096, "tokenizer_json": 65536,
           "tokenizer_model": 16384, "hf_config": 4096, "config_yaml": 4096,
           "chat_template": 8192, "grpc_request": 2048, "openai_request": 4096}


def run_target(build, repo, name, seconds, runs):
    exe = os.path.join(build, "bin", f"fuzz_{name}")
    work = os.path.join(build, "fuzz-work", name)
    artifacts = os.path.join(build, "fuzz-artifacts", name) + "/"
    os.makedirs(work, exist_ok=True)
    os.makedirs(artifacts, exist_ok=True)
    corpora = [work, os.path.join(build, "fuzz-corpus", name)]
    regress = os.path.join(repo, "tests", "fuzz", "regressions", name)
    if os.path.isdir(regress):
        corpora.append(regress)
    cmd = [exe, f"-max_total_time={seconds}", "-print_final_stats=1", "-timeout=20",
           "-rss_limit_mb=4096", f"-max_len={MAX_LEN.get(name, 4096)}",
           f"-artifact_prefix={artifacts}"] + ([f"-runs={runs}"] if runs else []) + corpora
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    log = proc.stdout
    with open(os.path.join(build, "fuzz-artifacts", f"{name}.log"), "w") as f:
        f.write(log)
    m = re.search(r"stat::number_of_executed_units:\s*(\d+)", log)
    executions = int(m.group(1)) if m else 0
    elapsed = time.time() - start
    found = sorted(os.listdir(artifacts))
    return {"target": name, "seconds": round(elapsed, 1), "executions": executions,
            "exec_per_second": round(executions / max(elapsed, 1e-9)),
            "crashed": proc.returncode != 0, "artifacts": [artifacts + f for f in found]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default="build-fuzz")
    p.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--seconds", type=int, default=60, help="per target")
    p.add_argument("--runs", type=int, default=0,
                   help="stop each target after this many executions (0: time only)")
    p.add_argument("--targets", default=",".join(MAX_LEN), help="comma-separated target names")
    p.add_argument("--json", action="store_true", help="one JSON object per target on stdout")
    args = p.parse_args()
    results = []
    for name in args.targets.split(","):
        limit = f"{args.runs} runs or {args.seconds} s" if args.runs else f"{args.seconds} s"
        print(f"[fuzz] {name}: {limit} ...", file=sys.stderr, flush=True)
        r = run_target(args.build_dir, args.repo, name, args.seconds, args.runs)
        results.append(r)
        status = "CRASH " + " ".join(r["artifacts"]) if r["crashed"] else "ok"
        print(f"[fuzz] {name}: {r['executions']} executions ({r['exec_per_second']}/s), {status}",
              file=sys.stderr, flush=True)
        if args.json:
            print(json.dumps(r), flush=True)
    if not args.json:
        print(f"{'target':<16} {'executions':>12} {'exec/s':>8}  result")
        for r in results:
            print(f"{r['target']:<16} {r['executions']:>12} {r['exec_per_second']:>8}  "
                  f"{'CRASH' if r['crashed'] else 'ok'}")
    return 1 if any(r["crashed"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
