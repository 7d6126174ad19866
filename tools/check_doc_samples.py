#!/usr/bin/env python3
"""//:doc_samples_test: every C sample of README.md and docs/*.md compiles and links
against tapegrad, so the documentation cannot drift from the API.

A sample is a fenced block whose info string is `c`. Its top-level declarations
(#include, typedef, struct, static functions and variables) stay at file scope, the
rest becomes the body of a function. Names a fragment uses without declaring them
come from an HTML comment just before the fence, invisible once rendered:

    <!-- sample: tg_module *model = NULL; tg_tensor *x = NULL, *y = NULL; -->

Each sample is compiled on its own with -Wall -Wextra -Werror (unused names
allowed), with #line directives so that an error names the Markdown file and line;
all are linked into one program with the library. An indented block that looks like
C (calls a tg_ function) is an error too: fence it as ```c so that it is checked.

    tools/check_doc_samples.py --lib bazel-bin/libtapegrad.a [--cc cc] [FILES...]
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```c[ \t]*\n(.*?)^```", re.S | re.M)
CONTEXT = re.compile(r"<!--\s*sample:(.*?)-->", re.S)
TOP = re.compile(r"^(#include|#define|typedef\b|static\b|struct \w+\s*\{|enum\b)")
LIBS = ["-ldl", "-lz", "-lcjson", "-lpng", "-ljpeg", "-lprotobuf-c", "-lm", "-lpthread"]  # OpenBLAS: loaded by the library (ops/cpu/blas.c)
CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-variable", "-Wno-unused-but-set-variable",
          "-Wno-unused-function", "-Wno-unused-parameter"]


def strip_comments(line):
    return re.sub(r"/\*.*?\*/|//.*$", "", line).strip()


def split(lines):
    """(top-level chunks, body lines): each a list of (line number offset, text)."""
    top, body, chunk, depth = [], [], None, 0
    for i, line in enumerate(lines):
        if chunk is None and depth == 0 and TOP.match(line):
            chunk = []
        code = strip_comments(line)
        if chunk is not None:
            chunk.append((i, line))
            depth += code.count("{") - code.count("}")
            if depth == 0 and (code.endswith(";") or code.endswith("}") or line.startswith("#")):
                top.append(chunk)
                chunk = None
        else:
            body.append((i, line))
    if chunk:
        top.append(chunk)
    return top, body


def samples(path):
    text = open(path).read()
    for m in FENCE.finditer(text):
        first_line = text.count("\n", 0, m.start(1)) + 1
        before = text[: m.start()].rstrip()
        context = ""
        comments = list(CONTEXT.finditer(before)) if before.endswith("-->") else []
        if comments and comments[-1].end() == len(before):  # right before the fence
            context = comments[-1].group(1).strip()
        yield first_line, m.group(1), context


def unfenced_c(path):
    """Indented blocks (4 spaces after a blank line) that call a tg_ function."""
    lines = open(path).read().split("\n")
    in_fence = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            if re.search(r"\btg_\w+\s*\(", line):
                yield i + 1


def translation_unit(path, index, first_line, code, context):
    top, body = split(code.split("\n"))
    rel = os.path.relpath(path, ROOT)
    out = ['#include "tapegrad.h"', "#include <math.h>", "#include <stdio.h>", "#include <stdlib.h>",
           "#include <string.h>"]
    for chunk in top:
        out.append('#line %d "%s"' % (first_line + chunk[0][0], rel))
        out += [t for _, t in chunk]
    out.append("int tg_doc_sample_%d(void);" % index)
    out.append("int tg_doc_sample_%d(void) {" % index)
    if context:
        out.append('#line %d "%s (the sample: comment)"' % (first_line - 1, rel))
        out.append(context)
    for n, t in body:
        out.append('#line %d "%s"' % (first_line + n, rel))
        out.append(t)
    out += ["    return 0;", "}"]
    return "\n".join(out) + "\n"


def instrumented(lib):
    """True for a library built with AddressSanitizer (it needs __asan_init)."""
    r = subprocess.run(["nm", lib], capture_output=True, text=True)
    return any(line.split()[-2:] == ["U", "__asan_init"] for line in r.stdout.splitlines())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--lib", required=True, help="libtapegrad.a (or .so) to link")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    work = tempfile.mkdtemp(prefix="tg_doc_samples_")
    failures, objects, count = 0, [], 0
    for path in files:
        rel = os.path.relpath(path, ROOT)
        for line in unfenced_c(path):
            print("FAIL %s:%d: C code in an indented block; fence it as ```c so that it is compiled" % (rel, line))
            failures += 1
        for first_line, code, context in samples(path):
            src = os.path.join(work, "sample_%d.c" % count)
            obj = src[:-2] + ".o"
            open(src, "w").write(translation_unit(path, count, first_line, code, context))
            r = subprocess.run([a.cc] + CFLAGS + ["-I" + ROOT, "-c", src, "-o", obj], capture_output=True, text=True)
            if r.returncode:
                print("FAIL %s:%d: the sample does not compile:\n%s" % (rel, first_line, r.stderr))
                failures += 1
            else:
                print("ok   %s:%d" % (rel, first_line))
                objects.append(obj)
            count += 1
    main_c = os.path.join(work, "main.c")
    with open(main_c, "w") as f:
        for i in range(count):
            f.write("int tg_doc_sample_%d(void);\n" % i)
        f.write("int main(int argc, char **argv) {\n    (void)argv;\n    if (argc > 1000) {\n")
        for i in range(count):
            f.write("        tg_doc_sample_%d();\n" % i)
        f.write("    }\n    return 0;\n}\n")
    # A sanitizer build (--config=asan) gives an instrumented archive, which links only
    # with the sanitizers' runtimes: link as its consumers must (tests/install_test.sh).
    sanitize = ["-fsanitize=address,undefined"] if instrumented(a.lib) else []
    if objects and not failures:
        r = subprocess.run([a.cc] + sanitize + [main_c] + objects + [a.lib] + LIBS + ["-o", os.path.join(work, "samples")],
                           capture_output=True, text=True)
        if r.returncode:
            print("FAIL linking the samples with %s:\n%s" % (a.lib, r.stderr))
            failures += 1
        else:
            print("ok   %d samples linked with %s" % (count, os.path.basename(a.lib)))
    if count == 0:
        print("FAIL no C sample found in %s" % ", ".join(files))
        failures += 1
    print("%d sample(s), %d failure(s)" % (count, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
