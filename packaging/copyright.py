#!/usr/bin/env python3
"""Writes the machine-readable debian/copyright (DEP-5) of one binary package to stdout.

    packaging/copyright.py CARGO_PACKAGE [EXTRA_STANZAS_FILE]

Lists every crate compiled into CARGO_PACKAGE's library: the normal (not build or dev) dependency
graph from `cargo metadata` for the package's target (RUST_TARGET, default the host's: so
dependencies under a cfg that target does not set, as loom's under cfg(loom), are left out),
without proc-macro crates, which run in the compiler and leave no
code in the binary. Each crate gets a Files stanza under its registry path with its authors and
its licence; every licence named gets its paragraph from packaging/licenses/.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LICENSES = os.path.join(ROOT, "packaging", "licenses")


def compiled_in(metadata, root_name):
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    root = next(p["id"] for p in metadata["packages"] if p["name"] == root_name and p["source"] is None)
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        if any("proc-macro" in t["kind"] for t in packages[pid]["targets"]):
            continue
        seen.append(pid)
        for dep in nodes[pid]["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]):
                todo.append(dep["pkg"])
    return [packages[i] for i in seen]


def dep5_licence(spdx):
    """SPDX 'MIT OR Apache-2.0' in DEP-5 spelling ('or', 'and'; GPL-2.0 is GPL-2)."""
    text = re.sub(r"\bOR\b", "or", re.sub(r"\bAND\b", "and", spdx))
    return text.replace("GPL-2.0-only", "GPL-2").replace("GPL-2.0", "GPL-2").replace("/", " or ")


def licence_names(expression):
    return sorted(set(n for n in re.split(r"[\s()]+", expression) if n and n not in ("or", "and")))


def main():
    cargo_package = sys.argv[1]
    extra = open(sys.argv[2]).read() if len(sys.argv) > 2 else ""
    target = os.environ.get("RUST_TARGET") or re.search(
        r"^host: (\S+)$", subprocess.check_output(["rustc", "-vV"], text=True), re.M
    ).group(1)
    metadata = json.loads(
        subprocess.check_output(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", target], cwd=ROOT
        )
    )
    crates = compiled_in(metadata, cargo_package)
    ours = [c for c in crates if c["source"] is None]
    theirs = sorted((c for c in crates if c["source"] is not None), key=lambda c: c["name"])
    used = set()
    out = [
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/",
        "Upstream-Name: rxe_rs",
        "Comment: Compiled in from the workspace: %s. From crates.io, as listed below: %s."
        % (", ".join(c["name"] for c in ours), ", ".join("%s %s" % (c["name"], c["version"]) for c in theirs) or "none"),
        "",
        "Files: *",
        "Copyright: 2026 The rxe_rs and nd-shim developers",
        "License: MIT or Apache-2.0",
    ]
    used.update(["MIT", "Apache-2.0"])
    for crate in theirs:
        licence = dep5_licence(crate["license"])
        used.update(licence_names(licence))
        out += [
            "",
            "Files: vendor/%s-%s/*" % (crate["name"], crate["version"]),
            "Copyright: %s" % ("\n ".join(crate["authors"]) or "The %s developers" % crate["name"]),
            "License: %s" % licence,
            "Comment: crate %s %s (crates.io), compiled in." % (crate["name"], crate["version"]),
        ]
    if extra:
        out += ["", extra.strip()]
        for m in re.finditer(r"^License: (.*)$", extra, re.M):
            used.update(licence_names(m.group(1)))
    for name in sorted(used):
        with open(os.path.join(LICENSES, name)) as f:
            body = f.read().rstrip("\n")
        out += ["", "License: %s" % name] + [" " + l if l else " ." for l in body.split("\n")]
    print("\n".join(out))


main()
