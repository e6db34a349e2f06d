#!/usr/bin/env python3
"""Prints "KEY FILE" for each source FILE: a sha256 of everything clang-tidy's
verdict on FILE depends on: clang-tidy's version, .clang-tidy, FILE's compile
command from BUILD/compile_commands.json, and FILE after the preprocessor
(so every header it includes, ours and the libraries'), with its comments
(NOLINT, /*arg=*/) and macro definitions kept, since checks read both. The checkout's own
path is taken out of all of them, so a clean clone elsewhere keys alike.

scripts/lint.sh skips a file whose key it has seen pass before.

usage: tidy-keys.py ROOT BUILD FILE...
"""
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys


def preprocess_command(entry):
    """The compile command of ENTRY turned into one that writes the
    preprocessed source to stdout (no line markers, no object file; comments
    and #defines kept)."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    return args, out + ["-E", "-P", "-C", "-dD"]


def key_of(root, build, entry, fixed):
    args, cmd = preprocess_command(entry)
    pre = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, check=False)
    if pre.returncode != 0:
        # No key: the file is linted every time (clang-tidy reports why).
        return None
    h = hashlib.sha256()
    h.update(fixed)
    h.update(" ".join(args).replace(build, "@build").replace(root, "@").encode())
    h.update(b"\0")
    h.update(pre.stdout.replace(root.encode(), b"@"))
    return h.hexdigest()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    root = os.path.realpath(sys.argv[1])
    build = os.path.realpath(sys.argv[2])
    files = [os.path.realpath(f) for f in sys.argv[3:]]
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = {os.path.realpath(os.path.join(e["directory"], e["file"])): e for e in json.load(f)}
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, check=True).stdout
    with open(os.path.join(root, ".clang-tidy"), "rb") as f:
        config = f.read()
    fixed = version + b"\0" + config + b"\0"
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {
            f: pool.submit(key_of, root, build, entries[f], fixed) for f in files if f in entries
        }
        for f in files:
            key = futures[f].result() if f in futures else None
            print(key or "-", os.path.relpath(f, root))


if __name__ == "__main__":
    main()
