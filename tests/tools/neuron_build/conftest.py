"""Shared fixtures of the neuron_build tests (run by CTest as `neuron_build_pytest`; see
tests/tools/CMakeLists.txt). Paths come from the environment CTest sets:

- PAGODA_REPO: the source tree (the package is imported as `tools.neuron_build` from there);
- PAGODA_SHARED_DIR: ../shared (models and their references);
- PAGODA_BIN: the `pagoda` binary (inspect --neuron-manifest, generate, make-model).

torch is required, never skipped: without Debian's python3-torch the imports fail loudly
(scripts/install-deps.sh installs it).
"""
import json
import os
import subprocess
import sys

import pytest

REPO = os.environ.get("PAGODA_REPO",
                      os.path.abspath(os.path.join(os.path.dirname(__file__), "../../..")))
SHARED = os.environ.get("PAGODA_SHARED_DIR", os.path.join(REPO, "..", "shared"))
PAGODA = os.environ.get("PAGODA_BIN", os.path.join(REPO, "build", "bin", "pagoda"))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

AIDREAMS = os.path.join(SHARED, "models/aidreams260K/aidreams260K-f32.gguf")
SYNTH = os.path.join(SHARED, "models/synth-gqa")


def synth(name):
    return os.path.join(SYNTH, name + ".gguf")


def synth_reference(name):
    with open(os.path.join(SYNTH, name + ".reference.json")) as f:
        return json.load(f)


def aidreams_reference():
    with open(os.path.join(SHARED, "models/aidreams260K/reference.json")) as f:
        return json.load(f)


def build_artifacts(model, out, *extra):
    """Runs the builder CLI like a user; returns the parsed --json summary."""
    cmd = [sys.executable, "-m", "tools.neuron_build", "--model", model, "--out", str(out),
           "--target", "cpu-reference", "--json", "-q", *extra]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def pagoda():
    """The pagoda binary; a missing one fails the test (never skips)."""
    assert os.access(PAGODA, os.X_OK), f"pagoda binary not found at {PAGODA} (set PAGODA_BIN)"
    return PAGODA


@pytest.fixture(scope="session")
def aidreams_artifacts(tmp_path_factory):
    out = tmp_path_factory.mktemp("aidreams")
    build_artifacts(AIDREAMS, out)
    return out
