#!/usr/bin/env python3
"""The official `openai` Node SDK (a pinned version, installed with npm into the build tree at
test time) against `pagoda serve`: openai_sdk/sdk_test.cjs runs against two servers, both
behind a bearer token --
  aidreams: the aidreams260K model (greedy completions equal the reference tokens, whole and
            streamed; chat; n = 2 with a seed; 16 concurrent streams equal to their sequential
            outputs; the error classes; invalid JSON);
  tiny:     a synthetic model with a 1024-token context, one sequence and one waiting request
            at a time, 8 HTTP connections and 1 MiB bodies, no token (503 past the
            connections, cancellation through an AbortController, 429, 413).
Then the README's examples run as written against the tiny server (its ports put in place of
the default ones): the quick-start commands, the curl examples and the Node SDK example; the
Python SDK example is compiled (the package cannot be installed here).

Usage: openai_sdk_e2e_test.py --pagoda BIN --repo DIR --shared DIR --node-dir DIR
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pagoda_server import PagodaServer  # noqa: E402

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


def readme_blocks(repo, lang):
    with open(os.path.join(repo, "README.md")) as f:
        return re.findall(r"```" + lang + r"\n(.*?)```", f.read(), re.S)


def on_server(text, server, pagoda):
    """`text` aimed at `server` instead of the default addresses."""
    for default, port in (("127.0.0.1:8000", server.http_port),
                          ("127.0.0.1:9090", server.metrics_port),
                          ("127.0.0.1:50051", server.grpc_port)):
        text = text.replace(default, f"127.0.0.1:{port}")
    return text.replace("build/bin/pagoda", pagoda)


def structured_example_failures(stdout):
    """The README's structured-output example prints two completion bodies: a JSON-schema
    one (an object with a short string name and an integer age in 0..120) and a choice."""
    bodies, pos, decoder = [], 0, json.JSONDecoder()
    while pos < len(stdout.strip()):
        body, pos = decoder.raw_decode(stdout, pos)
        bodies.append(body)
        while pos < len(stdout) and stdout[pos].isspace():
            pos += 1
    if len(bodies) != 2:
        return [f"structured-output example: expected 2 bodies, got {stdout[-2000:]}"]
    failures = []
    first = bodies[0]["choices"][0]
    if first["finish_reason"] == "stop":
        value = json.loads(first["text"])
        if (set(value) != {"name", "age"} or not isinstance(value["age"], int)
                or not 0 <= value["age"] <= 120 or len(value["name"]) > 8):
            failures.append(f"structured-output example: {first['text']!r} breaks its schema")
    if bodies[1]["choices"][0]["text"] not in ("yes", "no"):
        failures.append(f"structured-output example: choice gave {bodies[1]['choices'][0]}")
    return failures


def run_readme_examples(args, server, node_dir):
    """Runs the README's client examples against `server`; returns the failures."""
    failures = []
    env = {k: v for k, v in os.environ.items() if k != "PAGODA_API_KEY"}
    # The quick start, the completions and the structured-output examples (the chat one needs
    # a chat template, which the demo model lacks; the SDK tests cover chat).
    blocks = [b for b in readme_blocks(args.repo, "sh")
              if b.startswith(("curl -s 127.0.0.1:8000/v1/completions",
                               "build/bin/pagoda generate --server"))]
    if len(blocks) != 3:
        failures.append("expected the quick-start, the curl and the structured-output examples, "
                        f"found {len(blocks)}")
    for block in blocks:
        out = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", on_server(block, server,
                                                                              args.pagoda)],
                             capture_output=True, text=True, timeout=120, env=env)
        if out.returncode != 0 or '"error"' in out.stdout or not out.stdout.strip():
            failures.append(f"README example failed ({out.returncode}):\n{block}\n"
                            f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
        elif '"stream": true' in block and "data: [DONE]" not in out.stdout:
            failures.append(f"no [DONE] in the streamed example's output:\n{out.stdout[-2000:]}")
        elif "response_format" in block:
            failures += structured_example_failures(out.stdout)
    js = readme_blocks(args.repo, "js")
    if len(js) != 1:
        failures.append(f"expected one Node example, found {len(js)}")
    for i, block in enumerate(js):
        script = os.path.join(node_dir, f"readme_example_{i}.mjs")  # beside node_modules
        with open(script, "w") as f:
            f.write(on_server(block, server, args.pagoda))
        out = subprocess.run(["node", script], capture_output=True, text=True, timeout=120,
                             env=env)
        if out.returncode != 0 or not out.stdout.strip():
            failures.append(f"README Node example failed ({out.returncode}):\n{out.stderr}")
    py = readme_blocks(args.repo, "python")
    if len(py) != 1:
        failures.append(f"expected one Python example, found {len(py)}")
    for block in py:
        try:
            compile(block, "README.md (python)", "exec")
        except SyntaxError as e:
            failures.append(f"README Python example: {e}")
    for f in failures:
        print(f, file=sys.stderr)
    print(f"README examples: {len(blocks) + len(js) + len(py) - len(failures)} passed, "
          f"{len(failures)} failed")
    return failures


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--pagoda", "--repo", "--shared", "--node-dir"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    sdk = install_sdk(args.node_dir)
    token = "sdk-test-token"
    tmp = tempfile.mkdtemp()
    tiny_model = os.path.join(tmp, "tiny.gguf")
    subprocess.run([args.pagoda, "make-model", "-q", "--preset", "tiny", "--context", "1024",
                    "-o", tiny_model], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PAGODA_API_KEY"}
    servers = []
    rc = 1
    try:
        servers.append(PagodaServer(
            args.pagoda, "model.name=aidreams", "model.chat_template=" + os.path.join(args.shared, "chat-templates/chatml-openhermes-2.5.jinja"),
            f"server.auth.bearer_token={token}", env=env,
            model=os.path.join(args.shared, "models/aidreams260K/aidreams260K-f32.gguf")))
        servers.append(PagodaServer(
            args.pagoda, "engine.max_num_seqs=1", "server.max_waiting_requests=1",
            "server.http_max_connections=8", "server.max_message_bytes=1048576", env=env,
            model=tiny_model))
        script = os.path.join(args.repo, "tests/e2e/openai_sdk/sdk_test.cjs")
        reference = os.path.join(args.shared, "models/aidreams260K/reference.json")
        rc = subprocess.run(["node", script, sdk, servers[0].url + "/v1", token, reference,
                             servers[1].url + "/v1"], timeout=300).returncode
        if run_readme_examples(args, servers[1], args.node_dir) and rc == 0:
            rc = 1
    finally:
        for server in servers:
            if rc != 0:
                print(server.output()[-4000:], file=sys.stderr)
            server.stop()
        os.unlink(tiny_model)
        os.rmdir(tmp)
    print(f"openai@{OPENAI_SDK_VERSION} SDK test: {'passed' if rc == 0 else 'FAILED'}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
