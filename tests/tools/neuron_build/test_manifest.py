"""The manifest the builder writes: schema, I/O contract, NEFF headers, and the C++ parser's
verdict (`pagoda inspect --neuron-manifest`)."""
import copy
import json
import os
import subprocess

import pytest

from conftest import pagoda
from tools.neuron_build import manifest as mf
from tools.neuron_build import programs as prog


def load(artifacts):
    with open(os.path.join(artifacts, "manifest.json")) as f:
        return json.load(f)


def test_manifest_schema(aidreams_artifacts):
    m = load(aidreams_artifacts)
    mf.validate(m)
    assert m["format"] == "pagoda-neuron-manifest/1" and m["target"] == "cpu-reference"
    assert m["model"] == {**m["model"], "n_layers": 4, "vocab": 512, "n_kv_heads": 4,
                          "head_dim": 16}
    assert m["kv_cache"]["layout"] == "[2][num_blocks][n_kv_heads][block_size][head_dim]"
    assert (m["kv_cache"]["slot_pad"], m["kv_cache"]["table_pad"]) == (-1, -1)
    assert {p["phase"] for p in m["programs"]} == {"prefill", "decode"}
    assert any(p.get("tokens_per_seq", 1) > 1 for p in m["programs"])
    for w in m["weights"]["tensors"]:  # every file holds exactly dtype x shape bytes
        size = 4
        for d in w["shape"]:
            size *= d
        assert os.path.getsize(os.path.join(aidreams_artifacts, w["file"])) == size, w


def test_program_files_declare_the_expected_tensors(aidreams_artifacts):
    m = load(aidreams_artifacts)
    for p in m["programs"]:
        path = os.path.join(aidreams_artifacts, p["neff"])
        with open(path, "rb") as f:
            name, lnc = mf.parse_neff_header(f.read(1024))
        assert (name, lnc) == ("pagoda-torchscript:" + p["id"], m["lnc"])
        _, io = prog.load_torchscript_neff(path)
        assert io["tensors"] == mf.program_io(m, p)
        by_role = {t["role"]: t for t in io["tensors"] if "role" in t}
        rows = p.get("max_seqs", 1)
        tokens = rows * p.get("tokens_per_seq", 1) if p["phase"] == "decode" else p["max_tokens"]
        assert by_role["input_ids"]["shape"] == [tokens]
        assert by_role["block_table"]["shape"] == [rows, p["max_ctx_blocks"]]
        assert by_role["logits"]["shape"] == [tokens if p["phase"] == "decode" else 1, 512]
        assert sum(1 for t in io["tensors"] if t.get("state")) == 2 * m["model"]["n_layers"]


def inspect(path):
    return subprocess.run([pagoda(), "inspect", "--neuron-manifest", path],
                          capture_output=True, text=True, timeout=60)


def test_pagoda_inspect_accepts_the_manifest(aidreams_artifacts):
    done = inspect(os.path.join(aidreams_artifacts, "manifest.json"))
    assert done.returncode == 0, done.stderr
    assert "pagoda-neuron-manifest/1, target cpu-reference, lnc 1" in done.stdout
    assert "speculative verification: up to 3 draft tokens per execution" in done.stdout
    for p in load(aidreams_artifacts)["programs"]:
        assert f"  {p['id']}: {p['phase']}" in done.stdout


@pytest.mark.parametrize("mutate,key", [
    (lambda m: m["programs"][-1].update(tokens_per_seq=9), "tokens_per_seq: expected 1..8"),
    (lambda m: m["kv_cache"].update(block_size=24), "kv_cache.block_size"),
    (lambda m: m["programs"][0]["io"].pop("logits"), "io.logits: missing"),
    (lambda m: m.update(format="pagoda-neuron-manifest/2"), "format: expected"),
])
def test_bad_manifests_fail_in_python_and_in_pagoda(aidreams_artifacts, tmp_path, mutate, key):
    m = copy.deepcopy(load(aidreams_artifacts))
    mutate(m)
    with pytest.raises(mf.ManifestError) as e:
        mf.validate(m)
    assert key in str(e.value)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(m))
    done = inspect(str(path))
    assert done.returncode != 0
    assert key in done.stderr, done.stderr


def test_neff_header_round_trip():
    h = mf.neff_header("pagoda-torchscript:decode_b1_t1_c8", 2)
    assert len(h) == 1024
    assert mf.parse_neff_header(h) == ("pagoda-torchscript:decode_b1_t1_c8", 2)
    with pytest.raises(ValueError):
        mf.parse_neff_header(h[:1000])
