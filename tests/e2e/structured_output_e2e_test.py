#!/usr/bin/env python3
"""End-to-end tests of structured output (JSON schema, json_object, regex, GBNF grammar, choice)
over gRPC and the OpenAI HTTP API, on a random-weight model sampled at temperature 1 (the least
cooperative model there is): every output that finished with "stop" must parse and validate
(Debian's python3-jsonschema), full-match its regex, parse under its grammar or be one of the
choices; outputs cut by max_tokens report "length"; hostile constraints are refused quickly.

The schemas, with valid and invalid instances, are tests/scheduler/grammar/schemas.json (shared
with the C++ compiler tests).
Usage: structured_output_e2e_test.py --pagoda BIN --repo DIR --shared DIR
"""
import concurrent.futures
import json
import os
import re
import sys
import time
import unittest

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_e2e_test as base  # noqa: E402  (compile_protos, Server, run_tests)

SAMPLES = 4  # per schema and API (n)
MAX_TOKENS = 200


def model_path():
    return os.path.join(base.ARGS.shared, "models/synth-gqa/llama-gqa-f32.gguf")


# jsonschema's built-in "time" / "date-time" checks need packages Debian 12 lacks (its fallback
# "time" check is draft 3's, which refuses RFC 3339's offsets): check both with RFC 3339's own
# grammar here.
FORMATS = jsonschema.FormatChecker()
_TIME = (r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?"
         r"([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])")
_DATE = r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"


@FORMATS.checks("time")
def _is_time(value):
    return not isinstance(value, str) or re.fullmatch(_TIME, value) is not None


@FORMATS.checks("date-time")
def _is_date_time(value):
    return not isinstance(value, str) or re.fullmatch(_DATE + "[Tt ]" + _TIME, value) is not None


def validate(instance, schema):
    jsonschema.validate(instance, schema, format_checker=FORMATS)


def load_schemas():
    with open(os.path.join(base.ARGS.repo, "tests/scheduler/grammar/schemas.json")) as f:
        return json.load(f)


def sampled(seed, max_tokens=MAX_TOKENS, n=SAMPLES, **kw):
    pb = base.pb
    return pb.GenerateRequest(
        prompt="Data:", sampling=pb.SamplingParams(temperature=1.0, seed=seed, n=n),
        stopping=pb.StoppingCriteria(max_tokens=max_tokens), **kw)


def completions(stub, request):
    """[(text, finish_reason)] of a unary Complete call."""
    resp = stub.Complete(request, timeout=120)
    return [(c.text, c.finish_reason) for c in resp.completions]


# A GBNF grammar of nested lists of small numbers, and its recursive-descent checker.
LIST_GRAMMAR = r'''
root ::= list
list ::= "[" ( item ( "," item )* )? "]"
item ::= list | [0-9] [0-9]?
'''


def parses_as_list(text):
    pos = 0

    def item():
        nonlocal pos
        if text.startswith("[", pos):
            return lst()
        m = re.compile(r"[0-9][0-9]?").match(text, pos)
        if not m:
            return False
        pos = m.end()
        return True

    def lst():
        nonlocal pos
        if not text.startswith("[", pos):
            return False
        pos += 1
        if text.startswith("]", pos):
            pos += 1
            return True
        if not item():
            return False
        while text.startswith(",", pos):
            pos += 1
            if not item():
                return False
        if not text.startswith("]", pos):
            return False
        pos += 1
        return True

    return lst() and pos == len(text)


REGEXES = [
    r"[0-9]{3}-[0-9]{4}",
    r"(yes|no|maybe)!?",
    r"[a-z]+@[a-z]+\.(com|org)",
    r"\d{1,3}(\.\d{1,3}){3}",
    r"[A-Z][a-z]{0,8}( [A-Z][a-z]{0,8})?",
    r"#[0-9a-fA-F]{6}",
    r"(ab|cd)*e",
]


class StructuredOutputTest(unittest.TestCase):
    """Constraints on a random-weight F32 model (its logits do not depend on the batch), n-gram
    speculation on (proposals are cut at the grammar and verified; outputs must be the same
    with it off)."""

    @classmethod
    def setUpClass(cls):
        cls.server = base.Server("engine.max_num_seqs=32", "speculative.method=ngram",
                                 "model.name=synth",
                                 "model.chat_template=" + os.path.join(
                                     base.ARGS.shared,
                                     "chat-templates/chatml-openhermes-2.5.jinja"),
                                 model=model_path())
        cls.schemas = load_schemas()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def check_outputs(self, name, outputs, accept):
        """Every output ends "stop" or "length"; "stop" ones pass `accept`. Returns #stop."""
        stops = 0
        for text, finish in outputs:
            self.assertIn(finish, ("stop", "length"), (name, text))
            if finish == "stop":
                stops += 1
                accept(text)
        return stops

    def test_json_schemas_over_grpc_validate(self):
        self.assertGreaterEqual(len(self.schemas), 30)
        stops = total = 0

        def run(i, case):
            req = sampled(1000 + i, json_schema=json.dumps(case["schema"]))
            return case, completions(self.server.stub, req)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for case, outs in pool.map(lambda a: run(*a), enumerate(self.schemas)):
                def accept(text, case=case):
                    try:
                        validate(json.loads(text), case["schema"])
                    except Exception as e:  # noqa: BLE001  (a failure names the case)
                        self.fail(f"{case['name']}: {text!r}: {e}")
                stops += self.check_outputs(case["name"], outs, accept)
                total += len(outs)
        print(f"json_schema over gRPC: {stops}/{total} finished with stop", file=sys.stderr)
        self.assertGreater(stops, total // 2)

    def test_json_schemas_over_openai_validate(self):
        stops = total = 0
        for i, case in enumerate(self.schemas):
            status, resp = self.completion_json(case, i)
            self.assertEqual(status, 200, resp)
            outs = [(c["text"], c["finish_reason"]) for c in resp["choices"]]

            def accept(text, case=case):
                validate(json.loads(text), case["schema"])
            stops += self.check_outputs(case["name"], outs, accept)
            total += len(outs)
        print(f"json_schema over HTTP: {stops}/{total} finished with stop", file=sys.stderr)
        self.assertGreater(stops, total // 2)

    def completion_json(self, case, i):
        """/v1/completions with vLLM's guided_json for even cases, response_format for odd."""
        body = {"model": "synth", "prompt": "json", "temperature": 1.0, "seed": 2000 + i,
                "n": 2, "max_tokens": MAX_TOKENS}
        if i % 2:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": case["name"], "schema": case["schema"]}}
        else:
            body["guided_json"] = case["schema"]
        return self.server.json("/v1/completions", body)

    def test_json_object(self):
        outs = completions(self.server.stub, sampled(7, n=16, json_object=True))
        stops = self.check_outputs("json_object", outs,
                                   lambda t: self.assertIsInstance(json.loads(t), dict))
        self.assertGreater(stops, 0)
        status, resp = self.server.json("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "x"}], "temperature": 1.0, "seed": 3,
            "n": 8, "max_tokens": MAX_TOKENS, "response_format": {"type": "json_object"}})
        self.assertEqual(status, 200, resp)
        for c in resp["choices"]:
            if c["finish_reason"] == "stop":
                self.assertIsInstance(json.loads(c["message"]["content"]), dict)

    def test_regexes_full_match(self):
        for i, rx in enumerate(REGEXES):
            outs = completions(self.server.stub, sampled(40 + i, n=8, regex=rx))
            stops = self.check_outputs(rx, outs, lambda t, rx=rx: self.assertTrue(
                re.fullmatch(rx, t), (rx, t)))
            self.assertGreater(stops, 0, (rx, outs))
            status, resp = self.server.json("/v1/completions", {
                "prompt": "x", "temperature": 1.0, "seed": i, "n": 4, "max_tokens": 64,
                "structured_outputs": {"regex": rx}})
            self.assertEqual(status, 200, resp)
            for c in resp["choices"]:
                if c["finish_reason"] == "stop":
                    self.assertTrue(re.fullmatch(rx, c["text"]), (rx, c["text"]))

    def test_grammar_outputs_parse(self):
        outs = completions(self.server.stub, sampled(5, n=16, grammar=LIST_GRAMMAR))
        stops = self.check_outputs("grammar", outs,
                                   lambda t: self.assertTrue(parses_as_list(t), t))
        self.assertGreater(stops, 0)
        status, resp = self.server.json("/v1/completions", {
            "prompt": "x", "temperature": 1.0, "seed": 9, "n": 4, "max_tokens": MAX_TOKENS,
            "guided_grammar": LIST_GRAMMAR})
        self.assertEqual(status, 200, resp)
        for c in resp["choices"]:
            if c["finish_reason"] == "stop":
                self.assertTrue(parses_as_list(c["text"]), c["text"])

    def test_choices(self):
        choices = ["red", "green", "blue", "dark blue", "ünïcødé ✓"]
        pb = base.pb
        outs = completions(self.server.stub,
                           sampled(11, n=16, choice=pb.Choices(choices=choices)))
        self.assertEqual(self.check_outputs("choice", outs,
                                            lambda t: self.assertIn(t, choices)), 16)
        status, resp = self.server.json("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "x"}], "temperature": 1.0, "n": 8,
            "guided_choice": choices})
        self.assertEqual(status, 200, resp)
        for c in resp["choices"]:
            self.assertEqual(c["finish_reason"], "stop")
            self.assertIn(c["message"]["content"], choices)

    def test_max_tokens_cut_reports_length(self):
        schema = {"type": "object", "properties": {"a": {"type": "string", "minLength": 50}},
                  "required": ["a"]}
        outs = completions(self.server.stub,
                           sampled(3, max_tokens=5, json_schema=json.dumps(schema)))
        self.assertEqual([f for _, f in outs], ["length"] * SAMPLES)

    def test_speculation_does_not_change_constrained_outputs(self):
        schema = json.dumps(self.schemas[0]["schema"])
        for seed in range(3):
            with_spec = completions(self.server.stub, sampled(seed, json_schema=schema))
            without = completions(self.server.stub,
                                  sampled(seed, json_schema=schema, speculative=False))
            self.assertEqual(with_spec, without)

    def test_hostile_constraints_fail_fast_with_clear_errors(self):
        grpc = base.grpc
        # Built as text: Python's own encoder would recurse once per level.
        deep = '{"type": "array", "items": ' * 5000 + "{}" + "}" * 5000
        hostile = [
            ("json_schema", {"json_schema": deep}),
            ("json_schema", {"json_schema": json.dumps(
                {"enum": [f"value-{i}" for i in range(100000)]})}),
            ("json_schema", {"json_schema": json.dumps({"type": "string", "minLength": 10**9})}),
            ("json_schema", {"json_schema": json.dumps({"not": {"type": "string"}})}),
            ("json_schema", {"json_schema": "{not json"}),
            ("regex", {"regex": "(ab){1,100000}"}),
            ("regex", {"regex": "(a"}),
            ("regex", {"regex": "(a)\\1"}),
            ("grammar", {"grammar": "root ::= root \"a\""}),
            ("grammar", {"grammar": "root ::= undefined"}),
            ("grammar", {"grammar": "root ::= " + "(" * 5000 + "\"a\"" + ")" * 5000}),
        ]
        for field, kw in hostile:
            start = time.time()
            with self.assertRaises(grpc.RpcError, msg=f"{field} {str(kw)[:80]}") as cm:
                completions(self.server.stub, sampled(1, **kw))
            self.assertLess(time.time() - start, 5.0, field)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertTrue(cm.exception.details().startswith(field), cm.exception.details())
        status, resp = self.server.json("/v1/completions", {"prompt": "x", "guided_regex": "(a"})
        self.assertEqual(status, 400, resp)
        self.assertTrue(resp["error"]["message"].startswith("guided_regex"), resp)
        # The server still serves.
        outs = completions(self.server.stub, sampled(1, n=1, choice=base.pb.Choices(
            choices=["ok"])))
        self.assertEqual(outs, [("ok", "stop")])


if __name__ == "__main__":
    base.main()  # --pagoda, --repo, --shared into base.ARGS; runs this module's tests
