#!/usr/bin/env python3
"""Renders chat templates with Python jinja2 configured exactly as transformers does
(see shared/chat-templates/README.md), for the differential tests of the C++ renderer.

stdin: a JSON list of {"template": str, "variables": {...}}
stdout: a JSON list of {"text": str} or {"error": "<ExceptionType>: message"}
strftime_now's clock is fixed at 2026-07-26 12:00:00.
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox
from jinja2.exceptions import TemplateError


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime(2026, 7, 26, 12, 0, 0).strftime(fmt)


def main():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    out = []
    for case in json.load(sys.stdin):
        variables = {"tools": None, "documents": None}
        variables.update(case.get("variables", {}))
        try:
            out.append({"text": env.from_string(case["template"]).render(**variables)})
        except Exception as e:  # noqa: BLE001 - every failure is data for the comparison
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()
