#!/usr/bin/env python3
"""End-to-end tests of the OpenAI-compatible HTTP API of `pagoda serve`, driven by curl and raw
sockets (no client library): greedy completions of the aidreams260K reference prompts, the SSE
stream byte for byte against golden files, errors, auth, /tokenize, /detokenize, health,
metrics, client disconnects and the connection bound.

Every server runs on free loopback ports and is stopped at the end.
Usage: openai_e2e_test.py --pagoda BIN --repo DIR --shared DIR
"""
import argparse
import concurrent.futures
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pagoda_server import PagodaServer  # noqa: E402

ARGS = None


class Server(PagodaServer):
    """A `pagoda serve` process (tests/e2e/pagoda_server.py); `port` is its HTTP API's."""

    def __init__(self, *sets, model=None, env=None, cacert=None):
        super().__init__(ARGS.pagoda, *sets, model=model, env=env, cacert=cacert)
        self.port = self.http_port


def sse_events(body):
    """The data payloads of an SSE body (bytes), in order; checks the framing."""
    text = body.decode()
    assert text.endswith("\n\n"), text[-80:]
    events = text[:-2].split("\n\n")
    out = []
    for e in events:
        assert e.startswith("data: "), e
        out.append(e[len("data: "):])
    return out


def normalized(body):
    """The SSE / JSON body with its `created` timestamps set to 0 (the one varying field)."""
    return re.sub(rb'"created":\d+', b'"created":0', body)


class AidreamsHttpTest(unittest.TestCase):
    """The HTTP API on the aidreams260K model (chat through a real ChatML template file)."""

    @classmethod
    def setUpClass(cls):
        cls.model = os.path.join(ARGS.shared, "models/aidreams260K/aidreams260K-f32.gguf")
        with open(os.path.join(ARGS.shared, "models/aidreams260K/reference.json")) as f:
            cls.ref = json.load(f)
        cls.server = Server("engine.max_num_seqs=32", "model.chat_template=" + os.path.join(
                                ARGS.shared, "chat-templates/chatml-openhermes-2.5.jinja"),
                            "model.name=aidreams", model=cls.model)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def expected(self, case):
        ctx = self.ref["config"]["seq_len"]
        return case["greedy_tokens"][:ctx - len(case["prompt_tokens"])]

    def greedy_body(self, case, **kw):
        body = {"model": "aidreams", "prompt": case["prompt_tokens"],
                "max_tokens": len(case["greedy_tokens"]), "temperature": 0,
                "stop_token_ids": [1], "logprobs": 0, "return_tokens_as_token_ids": True}
        body.update(kw)
        return body

    @staticmethod
    def ids(tokens):
        return [int(t[len("token_id:"):]) for t in tokens]

    def streamed(self, body):
        status, raw = self.server.curl("/v1/completions", dict(body, stream=True))
        self.assertEqual(status, 200, raw)
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        tokens, text, finish = [], "", None
        for e in events[:-1]:
            choice = json.loads(e)["choices"][0]
            text += choice["text"]
            tokens += self.ids(choice["logprobs"]["tokens"]) if choice["logprobs"] else []
            finish = choice["finish_reason"] or finish
        return tokens, text, finish

    def test_greedy_completions_match_reference(self):
        for case in self.ref["cases"]:
            status, resp = self.server.json("/v1/completions", self.greedy_body(case))
            self.assertEqual(status, 200, resp)
            choice = resp["choices"][0]
            tokens = self.ids(choice["logprobs"]["tokens"])
            self.assertEqual(tokens, self.expected(case), case["prompt"])
            self.assertEqual(choice["finish_reason"], "length")
            self.assertEqual(resp["usage"]["completion_tokens"], len(tokens))
            self.assertEqual(resp["usage"]["prompt_tokens"], len(case["prompt_tokens"]))
            # The text continues the prompt's (Decode drops a leading space of the first token).
            _, prompt = self.server.json("/detokenize", {"tokens": case["prompt_tokens"]})
            _, whole = self.server.json("/detokenize", {"tokens": case["prompt_tokens"] + tokens})
            self.assertEqual(prompt["prompt"] + choice["text"], whole["prompt"])
            # The stream carries the same tokens and text.
            self.assertEqual(self.streamed(self.greedy_body(case)),
                             (tokens, choice["text"], "length"))

    def test_concurrent_streams_match_reference(self):
        cases = [self.ref["cases"][i % len(self.ref["cases"])] for i in range(16)]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(self.streamed, self.greedy_body(c)) for c in cases]
            for case, fut in zip(cases, futures):
                self.assertEqual(fut.result()[0], self.expected(case))

    def test_several_prompts(self):
        """An array of prompts: choice i * n + j is sample j of prompt i, whole or streamed, with
        the usage summed; greedy ones equal each prompt's reference tokens."""
        cases = self.ref["cases"][:3]
        body = {"model": "aidreams", "prompt": [c["prompt_tokens"] for c in cases],
                "max_tokens": 8, "temperature": 0, "n": 2, "logprobs": 0,
                "return_tokens_as_token_ids": True}
        status, resp = self.server.json("/v1/completions", body)
        self.assertEqual(status, 200, resp)
        self.assertEqual([c["index"] for c in resp["choices"]], list(range(6)))
        for i, case in enumerate(cases):
            for j in range(2):
                choice = resp["choices"][i * 2 + j]
                self.assertEqual(self.ids(choice["logprobs"]["tokens"]),
                                 self.expected(case)[:8], (i, j))
        self.assertEqual(resp["usage"]["completion_tokens"], 6 * 8)
        self.assertEqual(resp["usage"]["prompt_tokens"],
                         sum(len(c["prompt_tokens"]) for c in cases))
        status, raw = self.server.curl("/v1/completions", dict(
            body, stream=True, stream_options={"include_usage": True}))
        self.assertEqual(status, 200, raw)
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        texts, finishes = [""] * 6, [None] * 6
        for chunk in chunks[:-1]:
            for c in chunk["choices"]:
                texts[c["index"]] += c["text"]
                finishes[c["index"]] = c["finish_reason"] or finishes[c["index"]]
        self.assertEqual(texts, [c["text"] for c in resp["choices"]])
        self.assertEqual(finishes, ["length"] * 6)
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 6 * 8)
        # Strings too; one log line for the request, with the summed usage.
        status, resp = self.server.json("/v1/completions", {
            "prompt": ["Echoes", "Whispers of"], "max_tokens": 3, "request_id": "multi-1"})
        self.assertEqual((status, len(resp["choices"])), (200, 2))
        self.assertTrue(self.server.wait_idle())
        line = [ln for ln in self.server.output().splitlines() if "id=cmpl-multi-1 " in ln]
        self.assertEqual(len(line), 1, line)
        self.assertIn("completion_tokens=6", line[0])
        self.assertEqual(self.server.json("/tokenize", {"prompt": ["a", "b"]})[0], 400)

    def test_echo(self):
        """echo: each choice's text starts with its prompt's text (token-id prompts detokenized),
        whole or streamed."""
        body = {"prompt": ["Echoes", self.ref["cases"][2]["prompt_tokens"]], "max_tokens": 4,
                "temperature": 0, "n": 2}
        _, plain = self.server.json("/v1/completions", body)
        status, echoed = self.server.json("/v1/completions", dict(body, echo=True))
        self.assertEqual(status, 200, echoed)
        prompts = ["Echoes", self.ref["cases"][2]["prompt"]]
        for i, choice in enumerate(echoed["choices"]):
            self.assertEqual(choice["text"], prompts[i // 2] + plain["choices"][i]["text"], i)
        self.assertEqual(echoed["usage"], plain["usage"])
        _, raw = self.server.curl("/v1/completions", dict(body, echo=True, stream=True))
        texts = [""] * 4
        for e in sse_events(raw)[:-1]:
            for c in json.loads(e)["choices"]:
                texts[c["index"]] += c["text"]
        self.assertEqual(texts, [c["text"] for c in echoed["choices"]])

    def check_golden(self, name, path, body):
        status, raw = self.server.curl(path, body)
        self.assertEqual(status, 200, raw)
        golden_path = os.path.join(ARGS.repo, "tests/e2e/golden", name)
        if os.environ.get("PAGODA_UPDATE_GOLDEN"):
            with open(golden_path, "wb") as f:
                f.write(normalized(raw))
        with open(golden_path, "rb") as f:
            self.assertEqual(normalized(raw), f.read())
        created = [int(c) for c in re.findall(rb'"created":(\d+)', raw)]
        self.assertTrue(created and all(abs(c - time.time()) < 60 for c in created), created)

    def test_sse_bytes_match_golden(self):
        self.check_golden("completion_stream.sse", "/v1/completions", {
            "model": "aidreams", "prompt": "Whispers of vectors", "max_tokens": 6,
            "temperature": 0, "stream": True, "request_id": "golden-1",
            "stream_options": {"include_usage": True}})
        self.check_golden("chat_stream.sse", "/v1/chat/completions", {
            "model": "aidreams", "messages": [{"role": "user", "content": "Echoes"}],
            "max_tokens": 4, "temperature": 0, "stream": True, "request_id": "golden-2"})
        self.check_golden("chat.json", "/v1/chat/completions", {
            "model": "aidreams", "messages": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "Echoes"}],
            "max_completion_tokens": 5, "temperature": 0, "request_id": "golden-3"})

    def test_logprobs_shapes(self):
        _, resp = self.server.json("/v1/completions", {
            "prompt": "Echoes", "max_tokens": 4, "temperature": 0, "logprobs": 2})
        lp = resp["choices"][0]["logprobs"]
        self.assertEqual(sorted(lp), ["text_offset", "token_logprobs", "tokens", "top_logprobs"])
        self.assertEqual([len(lp[k]) for k in sorted(lp)], [4, 4, 4, 4])
        self.assertEqual("".join(lp["tokens"]), resp["choices"][0]["text"])
        self.assertEqual(lp["text_offset"][0], 0)
        self.assertTrue(all(len(t) == 2 for t in lp["top_logprobs"]))
        self.assertAlmostEqual(max(lp["top_logprobs"][0].values()), lp["token_logprobs"][0],
                               places=4)
        _, resp = self.server.json("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0,
            "logprobs": True, "top_logprobs": 2})
        content = resp["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(content), 3)
        for c in content:
            self.assertEqual(sorted(c), ["bytes", "logprob", "token", "top_logprobs"])
            self.assertEqual(bytes(c["bytes"]).decode(), c["token"])
            self.assertEqual(len(c["top_logprobs"]), 2)

    def test_chat_stream_equals_chat_body(self):
        body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hum"}]}],
                "max_tokens": 12, "temperature": 0}
        _, whole = self.server.json("/v1/chat/completions", body)
        _, raw = self.server.curl("/v1/chat/completions", dict(body, stream=True))
        events = [json.loads(e) for e in sse_events(raw)[:-1]]
        self.assertEqual(events[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})
        text = "".join(e["choices"][0]["delta"].get("content", "") for e in events)
        self.assertEqual(text, whole["choices"][0]["message"]["content"])
        self.assertEqual(events[-1]["choices"][0]["finish_reason"],
                         whole["choices"][0]["finish_reason"])
        self.assertEqual(whole["object"], "chat.completion")
        self.assertTrue(whole["id"].startswith("chatcmpl-"))

    def test_logit_bias_forces_and_bans_tokens(self):
        """logit_bias {"<id>": 100} makes every greedy token that id (completions, streamed and
        chat); -100 on the reference's first token bans it; logprobs stay the model's own."""
        case = self.ref["cases"][0]
        expected = self.expected(case)
        forced = next(t for t in range(100, 200) if t not in expected[:8])
        body = self.greedy_body(case, max_tokens=8, logit_bias={str(forced): 100})
        status, resp = self.server.json("/v1/completions", body)
        self.assertEqual(status, 200, resp)
        logprobs = resp["choices"][0]["logprobs"]
        self.assertEqual(self.ids(logprobs["tokens"]), [forced] * 8)
        self.assertLess(logprobs["token_logprobs"][0], -0.6)  # not the argmax: p <= 1/2
        self.assertEqual(self.streamed(body)[0], [forced] * 8)
        status, resp = self.server.json("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Echoes"}], "max_tokens": 4,
            "temperature": 0, "logprobs": True, "return_tokens_as_token_ids": True,
            "logit_bias": {str(forced): 100}})
        self.assertEqual(status, 200, resp)
        self.assertEqual([c["token"] for c in resp["choices"][0]["logprobs"]["content"]],
                         [f"token_id:{forced}"] * 4)
        status, resp = self.server.json("/v1/completions", self.greedy_body(
            case, max_tokens=4, logit_bias={str(expected[0]): -100}))
        self.assertEqual(status, 200, resp)
        tokens = self.ids(resp["choices"][0]["logprobs"]["tokens"])
        self.assertTrue(tokens)
        self.assertNotIn(expected[0], tokens)

    def test_n_samples(self):
        status, resp = self.server.json("/v1/completions", {
            "prompt": "Echoes", "max_tokens": 5, "n": 3, "temperature": 0.9, "seed": 7})
        self.assertEqual(status, 200, resp)
        self.assertEqual([c["index"] for c in resp["choices"]], [0, 1, 2])
        self.assertEqual(resp["usage"]["completion_tokens"], 15)

    def test_errors_are_openai_shaped(self):
        ctx = self.ref["config"]["seq_len"]
        bad = [
            ("/v1/completions", {"prompt": "hi", "max_tokens": 0}, 400, "max_tokens"),
            ("/v1/completions", {"prompt": "hi", "max_tokens": 10**6}, 400, "max_tokens"),
            ("/v1/completions", {"prompt": ""}, 400, "prompt"),
            ("/v1/completions", {}, 400, "prompt"),
            ("/v1/completions", {"prompt": [5] * (ctx + 1)}, 400, "prompt"),
            ("/v1/completions", {"prompt": [1, 99999]}, 400, "prompt_token_ids"),
            ("/v1/completions", {"prompt": "hi", "temperature": -1}, 400, None),
            ("/v1/completions", {"prompt": "hi", "top_p": "x"}, 400, "top_p"),
            ("/v1/completions", {"prompt": ["a", [1, 99999]]}, 400, "prompt[1]"),
            ("/v1/completions", {"prompt": "hi", "echo": True, "logprobs": 1}, 400, "echo"),
            ("/v1/completions", {"prompt": "hi", "model": "gpt-4"}, 404, "model"),
            ("/v1/completions", {"prompt": "hi", "logit_bias": {"abc": 1}}, 400,
             "logit_bias.abc"),
            ("/v1/completions", {"prompt": "hi", "logit_bias": {"5": "x"}}, 400, "logit_bias.5"),
            ("/v1/completions", {"prompt": "hi", "logit_bias": {"99999": 1}}, 400,
             "logit_bias.99999"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                      "logit_bias": {"5": 101}}, 400, "logit_bias.5"),
            ("/v1/chat/completions", {"messages": []}, 400, "messages"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                      "tools": [{"type": "function"}]}, 400, "tools"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                      "response_format": {"type": "json_schema"}},
             400, "response_format.json_schema"),
            ("/v1/completions", {"prompt": "x", "guided_regex": "(a"}, 400, "guided_regex"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "x"}}]}]}, 400, None),
        ]
        for path, body, code, param in bad:
            status, resp = self.server.json(path, body)
            self.assertEqual(status, code, (body, resp))
            err = resp["error"]
            self.assertTrue(err["message"], body)
            self.assertEqual(err["code"], code)
            self.assertIn(err["type"], ("invalid_request_error", "not_found_error"))
            if param:
                self.assertTrue(err["message"].startswith(param), err)
        _, resp = self.server.json("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})
        self.assertEqual(resp["error"]["message"], "tools: not supported yet")
        status, text = self.server.curl("/v1/completions", raw="")  # no body
        self.assertEqual(status, 400, text)
        status, text = self.server.curl("/v1/completions", raw="{not json")
        self.assertEqual(status, 400, text)
        status, text = self.server.curl("/v1/completions", raw="x" * (17 * 1024 * 1024))
        self.assertEqual(status, 413, text[:200])
        self.assertEqual(json.loads(text)["error"]["message"],
                         "body: larger than server.max_message_bytes")
        status, resp = self.server.json("/v1/embeddings", {"input": "x"})
        self.assertEqual((status, resp["error"]["message"]), (404, "no route POST /v1/embeddings"))
        status, resp = self.server.json("/v1/completions", {"prompt": "x", "echo": "yes"})
        self.assertEqual((status, resp["error"]["param"]), (400, "echo"))
        status, resp = self.server.json("/v1/completions",
                                        {"prompt": "x", "logit_bias": {"1.5": 1}})
        self.assertEqual((status, resp["error"]["param"]), (400, "logit_bias.1.5"))

    def test_models_tokenize_detokenize(self):
        status, models = self.server.json("/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual([m["id"] for m in models["data"]], ["aidreams"])
        self.assertEqual(models["data"][0]["max_model_len"], 128)
        self.assertEqual(self.server.json("/v1/models/aidreams")[0], 200)
        self.assertEqual(self.server.json("/v1/models/other")[0], 404)
        case = self.ref["cases"][2]
        status, tok = self.server.json("/tokenize", {"prompt": case["prompt"]})
        self.assertEqual(status, 200, tok)
        self.assertEqual(tok["tokens"], case["prompt_tokens"])
        self.assertEqual(tok["count"], len(case["prompt_tokens"]))
        _, detok = self.server.json("/detokenize", {"tokens": case["prompt_tokens"]})
        self.assertEqual(detok["prompt"], case["prompt"])
        status, chat = self.server.json("/tokenize", {"messages": [{"role": "user",
                                                                    "content": "hi"}]})
        self.assertEqual(status, 200, chat)
        self.assertGreater(chat["count"], 3)
        self.assertEqual(self.server.json("/detokenize", {"tokens": [12345678]})[0], 400)

    def test_health_ready_metrics_and_log_line(self):
        self.assertEqual(self.server.curl("/health"), (200, b"ok\n"))
        self.assertEqual(self.server.curl("/ready"), (200, b"ready\n"))
        before = self.server.metric("pagoda:request_success_total", 'finished_reason="length"')
        self.server.json("/v1/completions", {"prompt": "Echoes", "max_tokens": 3,
                                             "request_id": "logged-1"})
        self.assertTrue(self.server.wait_idle())
        after = self.server.metric("pagoda:request_success_total", 'finished_reason="length"')
        self.assertEqual(after, before + 1)
        line = [ln for ln in self.server.output().splitlines() if "id=cmpl-logged-1" in ln]
        self.assertEqual(len(line), 1, line)
        self.assertIn("request api=http POST /v1/completions", line[0])
        self.assertIn("status=200 stream=false prompt_tokens=", line[0])
        self.assertIn("completion_tokens=3", line[0])


    def test_bench_serve_openai_smoke(self):
        out = subprocess.run([ARGS.pagoda, "bench", "serve", "--api", "openai", "-s",
                              f"127.0.0.1:{self.server.port}", "-c", "4", "-n", "8",
                              "--prompt-len", "16", "--gen-len", "20", "--json"],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        result = json.loads(out.stdout)
        self.assertEqual(result["api"], "openai")
        self.assertEqual(result["model"], "aidreams")
        self.assertEqual(result["failed"], 0)
        self.assertEqual(result["generated_tokens"], 8 * 20)
        self.assertEqual(result["itl_s"]["count"], 8 * 19)


class TinyHttpTest(unittest.TestCase):
    """Disconnects, auth, bounds and metric names: a synthetic model with a 1024-token
    context for long generations."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.model = os.path.join(cls.tmp, "tiny.gguf")
        subprocess.run([ARGS.pagoda, "make-model", "-q", "--preset", "tiny", "--context", "1024",
                        "-o", cls.model], check=True)

    def test_client_disconnect_aborts_the_request(self):
        server = Server(model=self.model)
        try:
            for aborted, stream in enumerate((True, False), start=1):
                body = json.dumps({"prompt": "Once upon a time", "max_tokens": 1000,
                                   "ignore_eos": True, "stream": stream}).encode()
                sock = socket.create_connection(("127.0.0.1", server.port))
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Type: application/json\r\n" +
                             f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                if stream:  # the first event has come
                    got = b""
                    while b"data: " not in got:
                        got += sock.recv(4096)
                else:  # the request is running (its status line comes when it has finished)
                    deadline = time.time() + 10
                    while (server.metric("pagoda:num_requests_running") != 1 and
                           time.time() < deadline):
                        time.sleep(0.01)
                self.assertEqual(server.metric("pagoda:num_requests_running"), 1)
                sock.close()
                start = time.time()
                self.assertTrue(server.wait_idle(timeout=5))
                waited = time.time() - start
                self.assertEqual(server.metric("pagoda:request_success_total",
                                               'finished_reason="abort"'), aborted)
                self.assertLess(server.metric("pagoda:generation_tokens_total"), 1000 * aborted)
                self.assertEqual(server.metric("pagoda:kv_cache_usage_perc"), 0)
                print(f"\n  stream={stream}: disconnect -> request aborted, idle after "
                      f"{waited * 1000:.0f} ms", file=sys.stderr)
            self.assertEqual(server.output().count("status=499"), 2)
        finally:
            server.stop()

    def test_api_key_from_environment(self):
        env = dict(os.environ, PAGODA_API_KEY="k3y")
        server = Server(model=self.model, env=env)
        try:
            body = {"prompt": "Once", "max_tokens": 2}
            status, resp = server.json("/v1/completions", body)
            self.assertEqual(status, 401)
            self.assertEqual(resp["error"]["type"], "authentication_error")
            self.assertEqual(server.json("/v1/completions", body,
                                         ["Authorization: Bearer wrong"])[0], 401)
            self.assertEqual(server.json("/v1/models", None, ["Authorization: Bearer k3y"])[0],
                             200)
            self.assertEqual(server.json("/v1/completions", body,
                                         ["Authorization: Bearer k3y"])[0], 200)
            self.assertEqual(server.json("/tokenize", {"prompt": "x"})[0], 401)
            self.assertEqual(server.curl("/health"), (200, b"ok\n"))  # probes need no token
        finally:
            server.stop()

    def test_connection_bound_answers_503(self):
        server = Server("server.http_max_connections=2", "server.http_timeout_seconds=2",
                        model=self.model)
        try:
            idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
            time.sleep(0.2)
            start = time.time()
            status, resp = server.json("/v1/models")
            self.assertEqual(status, 503, resp)
            self.assertEqual(resp["error"]["message"], "too many connections")
            self.assertLess(time.time() - start, 1.0)
            for s in idle:  # the idle connections are closed by the server's timeouts
                s.settimeout(15)
                self.assertEqual(s.recv(1), b"")
                s.close()
            self.assertEqual(server.json("/v1/models")[0], 200)
        finally:
            server.stop()

    def test_sigterm_drains_running_streams(self):
        # One sequence at a time, so three 1000-token streams take a while.
        server = Server("engine.max_num_seqs=1", model=self.model)
        body = {"prompt": "Once upon a time", "max_tokens": 1000, "ignore_eos": True,
                "stream": True}
        try:
            with concurrent.futures.ThreadPoolExecutor(3) as pool:
                streams = [pool.submit(server.curl, "/v1/completions", body) for _ in range(3)]
                deadline = time.time() + 10
                while server.metric("pagoda:num_requests_waiting") < 2 and time.time() < deadline:
                    time.sleep(0.005)
                server.proc.send_signal(signal.SIGTERM)
                time.sleep(0.05)
                self.assertEqual(server.curl("/ready"), (503, b"not ready\n"))
                status, resp = server.json("/v1/completions", {"prompt": "x"})
                self.assertEqual(status, 503, resp)
                self.assertEqual(resp["error"]["message"], "the server is shutting down")
                for f in streams:  # the running and waiting requests finish
                    status, raw = f.result()
                    self.assertEqual(status, 200)
                    events = sse_events(raw)
                    self.assertEqual(events[-1], "[DONE]")
                    self.assertEqual(json.loads(events[-2])["choices"][0]["finish_reason"],
                                     "length")
                    self.assertEqual(len(events) - 1, 1000)
            self.assertEqual(server.proc.wait(timeout=30), 0)
        finally:
            server.stop()

    def test_port_in_use_fails_start_up(self):
        server = Server(model=self.model)
        try:
            proc = subprocess.run([ARGS.pagoda, "serve", "--model", self.model,
                                   "--set", "server.listen_address=127.0.0.1:0",
                                   "--set", "server.metrics_address=127.0.0.1:0",
                                   "--set", f"server.http_address=127.0.0.1:{server.port}"],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertEqual(proc.stderr.splitlines()[-1],
                             f"error: server.http_address: cannot bind 127.0.0.1:{server.port}")
        finally:
            server.stop()

    def test_metric_names_vllm_and_both(self):
        for names in ("vllm", "both"):
            server = Server(f"server.metrics_names={names}", model=self.model)
            try:
                server.json("/v1/completions", {"prompt": "Once", "max_tokens": 2})
                text = server.metrics()
            finally:
                server.stop()
            samples = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
            sample_names = {ln.split("{")[0] for ln in samples}
            for name in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc",
                         "request_success_total", "time_to_first_token_seconds_bucket",
                         "e2e_request_latency_seconds_count"):
                self.assertIn("vllm:" + name, sample_names)
                self.assertEqual("pagoda:" + name in sample_names, names == "both", name)
            self.assertIn("vllm:gpu_cache_usage_perc", sample_names)
            for ln in samples:  # every sample, histogram buckets included
                self.assertIn('model_name="pagoda-synthetic-tiny"', ln)
            helps = [ln.split(" ", 3)[3] for ln in text.splitlines()
                     if ln.startswith("# HELP vllm:")]
            self.assertEqual(len(set(helps)), len(helps), helps)  # each metric its own text

    def test_metrics_behind_the_token(self):
        server = Server("server.auth.bearer_token=m3trics", "server.auth.protect_metrics=true",
                        model=self.model)
        try:
            for port in (server.http_port, server.metrics_port):
                status, body = server.curl("/metrics", port=port)
                self.assertEqual(status, 401, body)
                self.assertEqual(json.loads(body)["error"]["type"], "authentication_error")
                self.assertEqual(server.curl("/metrics", port=port,
                                             headers=["Authorization: Bearer wrong"])[0], 401)
                status, body = server.curl("/metrics", port=port,
                                           headers=["Authorization: Bearer m3trics"])
                self.assertEqual(status, 200)
                self.assertIn(b"pagoda:num_requests_running", body)
                self.assertEqual(server.curl("/health", port=port), (200, b"ok\n"))
                self.assertEqual(server.curl("/ready", port=port), (200, b"ready\n"))
        finally:
            server.stop()
        # Without a token to protect them with, protect_metrics refuses to start.
        proc = subprocess.run([ARGS.pagoda, "serve", "--model", self.model,
                               "--set", "server.auth.protect_metrics=true"],
                              capture_output=True, text=True, timeout=60,
                              env={k: v for k, v in os.environ.items() if k != "PAGODA_API_KEY"})
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("error: server.auth.protect_metrics: needs a token", proc.stderr)

    def test_full_queue_answers_429_with_retry_after(self):
        # One running and one waiting at most: of six long requests sent at once, some are
        # refused.
        server = Server("engine.max_num_seqs=1", "server.max_waiting_requests=1",
                        model=self.model)
        body = {"prompt": "Once upon a time", "max_tokens": 1000, "ignore_eos": True}
        try:
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                answers = list(pool.map(
                    lambda _: server.curl("/v1/completions", body, with_headers=True), range(6)))
            refused = [a for a in answers if a[0] == 429]
            self.assertTrue(refused, [a[0] for a in answers])
            self.assertTrue(any(a[0] == 200 for a in answers))
            for _, head, text in refused:
                self.assertIn("retry-after: 1", head.lower())
                err = json.loads(text)["error"]
                self.assertEqual((err["type"], err["code"]), ("rate_limit_error", 429))
                self.assertIn("waiting queue is full", err["message"])
            self.assertTrue(server.wait_idle())
            self.assertEqual(server.json("/v1/completions", {"prompt": "x", "max_tokens": 2})[0],
                             200)
        finally:
            server.stop()

    def test_half_open_connections_do_not_stall_health(self):
        server = Server(model=self.model)  # the default 64 connections
        socks = []
        try:
            for _ in range(64):  # connected, request partly sent, never finished
                sock = socket.create_connection(("127.0.0.1", server.port))
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Length: 100\r\n\r\n{\"prom")
                socks.append(sock)
            time.sleep(0.3)
            for path, expected in (("/health", b"ok\n"), ("/ready", b"ready\n")):
                start = time.time()
                self.assertEqual(server.curl(path), (200, expected))
                self.assertLess(time.time() - start, 1.0, path)
            status, resp = server.json("/v1/models")  # past the bound: refused at once
            self.assertEqual((status, resp["error"]["message"]), (503, "too many connections"))
            for sock in socks:
                sock.close()
            socks = []
            deadline = time.time() + 10
            while server.curl("/v1/models")[0] != 200 and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(server.json("/v1/models")[0], 200)
        finally:
            for sock in socks:
                sock.close()
            server.stop()

    def test_json_log_lines_parse(self):
        server = Server("logging.format=json", model=self.model)
        try:
            server.json("/v1/completions", {"prompt": "Once", "max_tokens": 2,
                                            "request_id": 'a "quoted" \\ id'})
            self.assertTrue(server.wait_idle())
            server.json("/v1/completions", {"prompt": "x", "top_p": "bad"})
            server.proc.send_signal(signal.SIGTERM)
            self.assertEqual(server.proc.wait(timeout=30), 0)
            text = server.output()
        finally:
            server.stop()
        lines = [json.loads(ln) for ln in text.splitlines()]  # every line is one JSON object
        msgs = [ln["msg"] for ln in lines]
        self.assertTrue(all(sorted(ln) == ["level", "msg", "time"] for ln in lines), lines)
        request = [m for m in msgs if m.startswith("request api=http")]
        self.assertEqual(len(request), 1, msgs)
        self.assertIn('id=cmpl-a "quoted" \\ id status=200', request[0])
        self.assertIn("shut down cleanly", msgs)

    def test_models_report_the_effective_max_model_len(self):
        server = Server("engine.max_model_len=300", model=self.model)
        try:
            _, models = server.json("/v1/models")
            self.assertEqual(models["data"][0]["max_model_len"], 300)
            self.assertEqual(server.json("/tokenize", {"prompt": "x"})[1]["max_model_len"], 300)
        finally:
            server.stop()

    def test_api_beyond_loopback_needs_a_token(self):
        env = {k: v for k, v in os.environ.items() if k != "PAGODA_API_KEY"}
        for key in ("server.http_address", "server.listen_address"):
            proc = subprocess.run([ARGS.pagoda, "serve", "--model", self.model,
                                   "--set", "server.metrics_address=127.0.0.1:0",
                                   "--set", "server.listen_address=127.0.0.1:0",
                                   "--set", "server.http_address=127.0.0.1:0",
                                   "--set", f"{key}=0.0.0.0:0"],
                                  capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(f"error: {key}: '0.0.0.0:0' is reachable beyond this host but no "
                          "token is set", proc.stderr)
        # allowed explicitly, or with a token (here from the environment)
        for sets, environ in ((["server.allow_unauthenticated=true"], env),
                              ([], dict(env, PAGODA_API_KEY="k"))):
            server = Server("server.http_address=0.0.0.0:0", *sets, model=self.model,
                            env=environ)
            try:
                self.assertEqual(server.curl("/health"), (200, b"ok\n"))
            finally:
                server.stop()

    def test_print_config_redacts_the_token(self):
        out = subprocess.run([ARGS.pagoda, "serve", "--set", "server.auth.bearer_token=t0psecret",
                              "--print-config"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("t0psecret", out.stdout)
        self.assertIn('bearer_token: "<redacted>"', out.stdout)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--pagoda", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--shared", required=True)
    ARGS, rest = parser.parse_known_args()
    prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    result = prog.result
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)


if __name__ == "__main__":
    main()
