#!/usr/bin/env python3
"""//:code_shape_test: the library's code stays readable in a debugger (issue 36).

- No multi-line macro over 30 lines (#define with continuation lines): a type-generic
  kernel is a template header of ordinary functions, a table is groups of rows.
- No function of 100 lines or more, counted from the line of its opening brace to
  its closing one (braces counted outside comments and literals).

    tools/check_code_shape.py [ROOT]    (default: the repository)
"""
import os
import re
import sys

LIBRARY = ["core", "autograd", "ops", "nn", "quant", "optim", "data", "io", "distributed", "onnx"]
SOURCES = (".c", ".h", ".cu", ".cuh")
MAX_MACRO_LINES = 30
MAX_FUNCTION_LINES = 99


def macros(lines):
    i = 0
    while i < len(lines):
        if re.match(r"\s*#\s*define\b", lines[i]):
            j = i
            while lines[j].rstrip().endswith("\\") and j + 1 < len(lines):
                j += 1
            yield i, j - i + 1, lines[i].split("(")[0].split()[-1]
            i = j
        i += 1


def code_only(line, in_comment):
    """The line without comments and string/char literals; whether a /* comment is open after it."""
    out, i = [], 0
    while i < len(line):
        if in_comment:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i, in_comment = end + 2, False
        elif line.startswith("/*", i):
            in_comment, i = True, i + 2
        elif line.startswith("//", i):
            break
        elif line[i] in "\"'":
            quote, i = line[i], i + 1
            while i < len(line) and line[i] != quote:
                i += 2 if line[i] == "\\" else 1
            i += 1
        else:
            out.append(line[i])
            i += 1
    return "".join(out), in_comment


def functions(lines):
    """(first line, length, head) of each function body: a { at depth 0 after a ), not
    an initialiser (=) or a struct, union or enum; it ends where the depth is 0 again."""
    depth, in_comment, start, head, text_before = 0, False, None, "", ""
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#"):
            continue
        code, in_comment = code_only(line, in_comment)
        for ch in code:
            if ch == "{":
                if depth == 0:
                    declarator = (text_before + code).split("{")[0]
                    is_function = ")" in declarator and "=" not in declarator.split("(")[0] and not re.search(
                        r"\b(struct|union|enum)\b[^()]*$", declarator)
                    start = i if is_function else None
                    head = line.strip()[:80] if is_function else ""
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and start is not None:
                    yield start, i - start + 1, head
                    start = None
        text_before = (text_before + " " + code)[-400:] if depth == 0 else ""
        if depth == 0 and code.rstrip().endswith((";", "}")):
            text_before = ""


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems, longest_macro, longest_function = [], (0, ""), (0, "")
    for folder in LIBRARY:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().split("\n")
                for start, n, what in macros(lines):
                    longest_macro = max(longest_macro, (n, f"{rel}:{start + 1} {what}"))
                    if n > MAX_MACRO_LINES:
                        problems.append(f"{rel}:{start + 1}: macro {what} is {n} lines (at most {MAX_MACRO_LINES})")
                for start, n, what in functions(lines):
                    longest_function = max(longest_function, (n, f"{rel}:{start + 1} {what}"))
                    if n > MAX_FUNCTION_LINES:
                        problems.append(f"{rel}:{start + 1}: function is {n} lines (under 100): {what}")
    print(f"longest macro: {longest_macro[0]} lines, {longest_macro[1]}")
    print(f"longest function: {longest_function[0]} lines, {longest_function[1]}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
