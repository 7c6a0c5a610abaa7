"""``python3 -m tools.neuron_build.run``: runs cpu-reference artifacts in-process.

``Runner`` plays the backend's part (docs/neuron-backend.md 5.6) on the TorchScript programs:
it owns the KV pools and the weights, stages each execution's inputs with the manifest's
padding sentinels (ids 0, positions 0, ``slot_pad``, ``table_pad``, ``context_lens`` 0), picks
programs like ``PickPrefillProgram`` / ``PickDecodeProgram`` and reads the logits. The command
line generates greedily for one prompt and prints ``{"token_ids": [...]}``.
"""
import argparse
import json
import os
import sys

import torch

from . import programs as prog
from . import weights as wt


class Runner:
    """cpu-reference artifacts loaded for in-process execution."""

    def __init__(self, artifacts_dir, manifest="manifest.json"):
        path = manifest if os.path.isabs(manifest) else os.path.join(artifacts_dir, manifest)
        with open(path) as f:
            self.manifest = json.load(f)
        self.dir = os.path.dirname(os.path.abspath(path))
        kv = self.manifest["kv_cache"]
        md = self.manifest["model"]
        self.block_size, self.num_blocks = kv["block_size"], kv["num_blocks"]
        self.slot_pad, self.table_pad = kv["slot_pad"], kv["table_pad"]
        self.vocab = md["vocab"]
        shape = [kv["num_blocks"], md["n_kv_heads"], kv["block_size"], md["head_dim"]]
        self.kv = [torch.zeros(shape, dtype=prog.TORCH_DTYPES[kv["dtype"]])
                   for _ in range(2 * md["n_layers"])]
        arrays = wt.load_exported(self.dir, self.manifest["weights"]["tensors"])
        self.weights = [prog.to_torch(arrays[e["name"]], e["dtype"])
                        for e in self.manifest["weights"]["tensors"]]
        self.programs = {}
        for p in self.manifest["programs"]:
            module, _ = prog.load_torchscript_neff(os.path.join(self.dir, p["neff"]))
            self.programs[p["id"]] = (p, module)
        self.executions = {pid: 0 for pid in self.programs}

    # --- program choice (kernels/neuron/bucketing.h) ------------------------------------------

    def pick_prefill(self, n_tokens, ctx_blocks):
        fits = [p for p, _ in self.programs.values() if p["phase"] == "prefill"
                and p["max_tokens"] >= n_tokens and p["max_ctx_blocks"] >= ctx_blocks]
        if not fits:
            raise ValueError(f"no prefill program takes {n_tokens} tokens x {ctx_blocks} blocks")
        return min(fits, key=lambda p: (p["max_tokens"], p["max_ctx_blocks"]))

    def pick_decode(self, n_seqs, query_len, ctx_blocks):
        fits = [p for p, _ in self.programs.values() if p["phase"] == "decode"
                and p["max_seqs"] >= n_seqs and p.get("tokens_per_seq", 1) >= query_len
                and p["max_ctx_blocks"] >= ctx_blocks]
        if not fits:
            raise ValueError(f"no decode program takes {n_seqs} x {query_len} tokens")
        return min(fits, key=lambda p: (p.get("tokens_per_seq", 1), p["max_seqs"],
                                        p["max_ctx_blocks"]))

    # --- one execution -------------------------------------------------------------------------

    def execute(self, program, rows):
        """Runs `program` on `rows`: [(token_ids, first_position, block_table)], each row's
        tokens at consecutive positions. Returns the logits tensor ([tokens or 1, vocab])."""
        decode = program["phase"] == "decode"
        tps = program.get("tokens_per_seq", 1) if decode else program["max_tokens"]
        n_rows = program["max_seqs"] if decode else 1
        width = program["max_ctx_blocks"]
        ids = torch.zeros(n_rows * tps, dtype=torch.int32)
        pos = torch.zeros(n_rows * tps, dtype=torch.int32)
        slots = torch.full((n_rows * tps,), self.slot_pad, dtype=torch.int32)
        table = torch.full((n_rows, width), self.table_pad, dtype=torch.int32)
        ctx = torch.zeros(n_rows, dtype=torch.int32)
        for r, (tokens, first, blocks) in enumerate(rows):
            for i, t in enumerate(tokens):
                p = first + i
                ids[r * tps + i] = t
                pos[r * tps + i] = p
                slots[r * tps + i] = blocks[p // self.block_size] * self.block_size + \
                    p % self.block_size
            ctx[r] = first + len(tokens)
            table[r, :min(width, len(blocks))] = torch.tensor(blocks[:width], dtype=torch.int32)
        _, module = self.programs[program["id"]]
        self.executions[program["id"]] += 1
        with torch.no_grad():
            return module(ids, pos, slots, table, ctx, *self.kv, *self.weights)

    # --- whole sequences -----------------------------------------------------------------------

    def blocks_for(self, n_tokens, first_block=0):
        n = (n_tokens + self.block_size - 1) // self.block_size
        if first_block + n > self.num_blocks:
            raise ValueError("the KV pool is too small for this sequence")
        return list(range(first_block, first_block + n))

    def prefill(self, tokens, blocks, start=0):
        """Runs tokens[start:] after `start` cached ones in pieces of the largest prefill program;
        returns the last token's logits [vocab]."""
        end = len(tokens)
        ctx_blocks = (end + self.block_size - 1) // self.block_size
        largest = max(p["max_tokens"] for p, _ in self.programs.values()
                      if p["phase"] == "prefill" and p["max_ctx_blocks"] >= ctx_blocks)
        logits = None
        for off in range(start, end, largest):
            piece = tokens[off:off + largest]
            program = self.pick_prefill(len(piece), ctx_blocks)
            logits = self.execute(program, [(piece, off, blocks)])[0]
        return logits

    def decode(self, rows):
        """One decode execution of rows [(new_tokens, first_position, blocks)]; returns per row
        the logits [len(new_tokens), vocab]."""
        q = max(len(r[0]) for r in rows)
        ctx_blocks = max((r[1] + len(r[0]) + self.block_size - 1) // self.block_size
                         for r in rows)
        program = self.pick_decode(len(rows), q, ctx_blocks)
        out = self.execute(program, rows)
        tps = program.get("tokens_per_seq", 1)
        return [out[r * tps:r * tps + len(row[0])] for r, row in enumerate(rows)]

    def generate(self, prompt, max_tokens, stop_ids=()):
        """Greedy tokens after `prompt` (prefill, then single-token decodes)."""
        max_len = len(prompt) + max_tokens
        blocks = self.blocks_for(max_len)
        out = []
        logits = self.prefill(list(prompt), blocks)
        seq = list(prompt)
        while len(out) < max_tokens:
            token = int(torch.argmax(logits))
            out.append(token)
            seq.append(token)
            if token in stop_ids or len(out) == max_tokens:
                break
            logits = self.decode([([token], len(seq) - 1, blocks)])[0][0]
        return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m tools.neuron_build.run",
                                description="Greedy generation on cpu-reference artifacts.")
    p.add_argument("--artifacts", required=True, help="directory with manifest.json")
    p.add_argument("--prompt-ids", required=True, help="comma-separated prompt token ids")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--stop-id", type=int, action="append", default=[],
                   help="stop after this token (repeatable)")
    args = p.parse_args(argv)
    prompt = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
    if not prompt:
        p.error("--prompt-ids: at least one token")
    runner = Runner(args.artifacts)
    tokens = runner.generate(prompt, args.max_tokens, set(args.stop_id))
    print(json.dumps({"token_ids": tokens}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
