#!/usr/bin/env python3
"""Checks every `#include "..."` of the repository against the allowed include edges.

The edges are read from the table in docs/ARCHITECTURE.md (section "Include edges"): one row
per source folder, with the folders (ending in /) or single headers it may include. A file may
always include files of its own folder. The most specific row (longest folder prefix) governs
a file, and an included path belongs to the longest folder prefix that has a row. Generated
protobuf headers (pagoda/v1/..., grpc/health/...) count as proto/.

Usage: check_include_edges.py [--repo DIR] [--json]
Exit status: 0 when every edge is allowed, 1 when one is not (each printed as
`file:line: includes X (folder F may include: ...)`), 2 when the table cannot be read.
"""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*(.*?)\s*\|\s*$")
GENERATED = ("pagoda/v1/", "grpc/health/")
SOURCE_SUFFIXES = (".h", ".cc", ".inc", ".cpp", ".hpp")


def read_table(doc: Path):
    """{folder: [allowed prefixes]} from the 'Include edges' table of ARCHITECTURE.md."""
    rules = {}
    in_section = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            in_section = line.strip() == "## Include edges"
            continue
        m = ROW.match(line) if in_section else None
        if not m:
            continue
        folder = m.group(1)
        allowed = re.findall(r"`([^`]+)`", m.group(2))
        rules[folder] = allowed
    return rules


def owner(path: str, folders):
    """The longest folder of `folders` that `path` lies in, or None."""
    best = None
    for f in folders:
        if path.startswith(f) and (best is None or len(f) > len(best)):
            best = f
    return best


def tracked_sources(repo: Path):
    out = subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True, text=True)
    if out.returncode != 0:  # not a checkout: walk the tree
        return [str(p.relative_to(repo)) for p in repo.rglob("*") if p.suffix in SOURCE_SUFFIXES]
    return [p for p in out.stdout.splitlines() if p.endswith(SOURCE_SUFFIXES)]


def check(repo: Path, rules):
    folders = list(rules)
    violations = []
    for path in tracked_sources(repo):
        src_folder = owner(path, folders)
        if src_folder is None:
            continue
        allowed = rules[src_folder]
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            if inc.startswith(GENERATED):
                inc = "proto/" + inc
            target = owner(inc, folders)
            if target is None or target == src_folder:
                continue  # a system-style or same-folder include
            if any(inc == a or (a.endswith("/") and inc.startswith(a)) for a in allowed):
                continue
            violations.append({"file": path, "line": lineno, "include": m.group(1),
                               "folder": src_folder, "allowed": allowed})
    return violations


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--json", action="store_true", help="print the violations as JSON")
    args = ap.parse_args()
    repo = Path(args.repo)
    doc = repo / "docs" / "ARCHITECTURE.md"
    try:
        rules = read_table(doc)
    except OSError as e:
        print(f"error: {doc}: {e}", file=sys.stderr)
        return 2
    if not rules:
        print(f"error: {doc}: no rows in the 'Include edges' table", file=sys.stderr)
        return 2
    violations = check(repo, rules)
    if args.json:
        print(json.dumps({"folders": len(rules), "violations": violations}, indent=2))
    for v in violations if not args.json else []:
        allowed = ", ".join(v["allowed"]) or "nothing outside itself"
        print(f"{v['file']}:{v['line']}: includes {v['include']} "
              f"(folder {v['folder']} may include: {allowed})")
    if not args.json:
        print(f"include edges: {len(rules)} folders, {len(violations)} forbidden includes")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
