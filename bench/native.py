"""Builds the benchmark's small C programs (bench/native/*.c) on demand.

Owns: compiling one program with gcc -O2 into bench/.build/, keyed by a hash
of its sources so a changed source is rebuilt. The C programs exist so that
per-call timings measure the file system, not the Python interpreter.
"""
import hashlib
import os

from proc import run

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "native")
BUILD = os.path.join(HERE, ".build")


def program(name):
    """Path to the compiled bench/native/<name>.c, building it if needed."""
    source = os.path.join(SRC, f"{name}.c")
    digest = hashlib.sha256()
    for path in (source, os.path.join(SRC, "common.h")):
        with open(path, "rb") as f:
            digest.update(f.read())
    binary = os.path.join(BUILD, f"{name}-{digest.hexdigest()[:12]}")
    if not os.path.exists(binary):
        os.makedirs(BUILD, exist_ok=True)
        tmp = f"{binary}.tmp{os.getpid()}"
        run(["gcc", "-O2", "-Wall", "-o", tmp, source], 120)
        os.replace(tmp, binary)
    return binary
