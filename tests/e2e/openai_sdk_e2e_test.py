#!/usr/bin/env python3
"""The official `openai` Node SDK (a pinned version, installed with npm into the build tree at
test time) against `pagoda serve`: openai_sdk/sdk_test.cjs lists models, checks greedy
completions of the aidreams260K reference prompts (whole and streamed), chat completions
(whole and streamed) and the SDK's error classes (400, 401, 404).

Usage: openai_sdk_e2e_test.py --pagoda BIN --repo DIR --shared DIR --node-dir DIR
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

OPENAI_SDK_VERSION = "6.30.1"  # pinned: the SDK the API is tested against


def install_sdk(node_dir):
    """npm-installs openai@OPENAI_SDK_VERSION under node_dir (once); returns its folder."""
    sdk = os.path.abspath(os.path.join(node_dir, "node_modules", "openai"))
    try:
        with open(os.path.join(sdk, "package.json")) as f:
            if json.load(f)["version"] == OPENAI_SDK_VERSION:
                return sdk
    except (OSError, ValueError, KeyError):
        pass
    os.makedirs(node_dir, exist_ok=True)
    subprocess.run(["npm", "install", "--prefix", node_dir, "--no-audit", "--no-fund",
                    "--save-exact", f"openai@{OPENAI_SDK_VERSION}"], check=True, timeout=300)
    return sdk


def start_server(args, token):
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    model = os.path.join(args.shared, "models/aidreams260K/aidreams260K-f32.gguf")
    cmd = [args.pagoda, "serve", "--model", model, "--set", "server.listen_address=127.0.0.1:0",
           "--set", "server.metrics_address=127.0.0.1:0",
           "--set", "server.http_address=127.0.0.1:0", "--set", "model.name=aidreams",
           "--set", "model.chat_template=" + os.path.join(
               args.shared, "chat-templates/chatml-openhermes-2.5.jinja"), "--set", f"server.auth.bearer_token={token}"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        with open(log.name) as f:
            m = re.search(r"HTTP API on .* \(port (\d+)\)", f.read())
        if m:
            return proc, log.name, int(m.group(1))
        time.sleep(0.05)
    with open(log.name) as f:
        raise RuntimeError("server did not start: " + f.read())


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--pagoda", "--repo", "--shared", "--node-dir"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    sdk = install_sdk(args.node_dir)
    token = "sdk-test-token"
    proc, log, port = start_server(args, token)
    try:
        script = os.path.join(args.repo, "tests/e2e/openai_sdk/sdk_test.cjs")
        reference = os.path.join(args.shared, "models/aidreams260K/reference.json")
        rc = subprocess.run(["node", script, sdk, f"http://127.0.0.1:{port}/v1", token,
                             reference], timeout=300).returncode
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if rc != 0:
            with open(log) as f:
                print(f.read()[-4000:], file=sys.stderr)
        os.unlink(log)
    print(f"openai@{OPENAI_SDK_VERSION} SDK test: {'passed' if rc == 0 else 'FAILED'}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
