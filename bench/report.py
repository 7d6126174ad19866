"""Turns the RESULT lines of bench/compare.sh into a table in docs/perf.md.
    report.py RESULTS PERF_MD [MARKER] [NOTE]
The table replaces the text between "<!-- BEGIN MARKER -->" and "<!-- END MARKER -->"
(MARKER defaults to "bench/compare.sh"; added at the end when absent). One column per
program that ran ("impl" of the RESULT lines): tapegrad, Debian's PyTorch 1.13,
PyTorch 2 eager and compiled, JAX; the speed-up is the fastest peer's time over
tapegrad's (above 1: tapegrad is faster). When tapegrad's lines carry "activation_peak_mib"
(the tutorials' most CPU tensor bytes held during one training step beyond the data,
parameters and optimizer state), a column shows it, so float32 and bf16 rows compare; with
"forward_peak_mib" (the same up to the loss: the activations without the parameter
gradients) beside it after a slash."""
import collections
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys

results_path, perf_path = sys.argv[1], sys.argv[2]
marker = sys.argv[3] if len(sys.argv) > 3 else "bench/compare.sh"
note = sys.argv[4] if len(sys.argv) > 4 else ""
IMPLS = [("tapegrad", "tapegrad"), ("pytorch", "PyTorch 1.13"), ("pytorch2", "PyTorch 2 eager"),
         ("pytorch2-compile", "PyTorch 2 compile"), ("jax", "JAX jit")]


def commit():
    """The measured commit (with -dirty when the tree has changes), for the record."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


runs = collections.defaultdict(list)
for line in open(results_path):
    r = json.loads(line[len("RESULT "):])
    runs[(r["bench"], r["impl"])].append(r)
present = [(key, title) for key, title in IMPLS if any(impl == key for _, impl in runs)]


def med(rs, key):
    vals = [r[key] for r in rs if key in r]
    return statistics.median(vals) if vals else None


with_activations = any("activation_peak_mib" in r for (_, impl), rs in runs.items() if impl == "tapegrad" for r in rs)
rows = []
for bench in sorted({b for b, _ in runs}):
    tg = runs.get((bench, "tapegrad"))
    peers = [(key, runs[(bench, key)]) for key, _ in present if key != "tapegrad" and (bench, key) in runs]
    if not tg or not peers:
        continue
    unit = tg[0].get("unit", "")
    higher_is_better = unit.endswith("/s")
    value = {key: med(rs, "unit_value") for key, rs in [("tapegrad", tg)] + peers}
    best = max if higher_is_better else min
    fastest = best(peers, key=lambda kr: value[kr[0]])[0]
    speedup = value["tapegrad"] / value[fastest] if higher_is_better else value[fastest] / value["tapegrad"]
    cells = [f"{value[key]:.4g} {unit}" if key in value else "" for key, _ in present]
    rss = [f"{med(runs[(bench, key)], 'peak_rss_mib'):.0f}" if (bench, key) in runs else "-" for key, _ in present]
    check = [str(runs[(bench, key)][-1].get("check", "")) if (bench, key) in runs else "-" for key, _ in present]
    fastest_title = dict(IMPLS)[fastest]
    activations, forward = med(tg, "activation_peak_mib"), med(tg, "forward_peak_mib")
    activation_text = "-" if activations is None else f"{activations:.1f}" + (f" / {forward:.2f}" if forward else "")
    activation_cell = f"{activation_text} | " if with_activations else ""
    rows.append(f"| {bench} | " + " | ".join(cells) + f" | {speedup:.2f}x ({fastest_title}) | "
                + " / ".join(rss) + " | " + activation_cell + " / ".join(check) + " |")

titles = [title for _, title in present]
versions = os.environ.get("TG_BENCH_VERSIONS", "PyTorch " + __import__("torch").__version__)
load = os.environ.get("TG_BENCH_LOAD", "")
table = "\n".join([
    f"Measured {datetime.date.today().isoformat()} on {platform.node()} ({platform.processor() or platform.machine()}) "
    f"at commit {commit()}, median of {max(len(v) for v in runs.values())} alternating runs; {versions}; "
    f"2 threads each; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}."
    + (f" {load}" if load else "") + (f" {note}" if note else ""),
    "",
    "| workload | " + " | ".join(titles) + " | speed-up vs the fastest peer (peer time / tapegrad time) | peak RSS MiB ("
    + " / ".join(titles) + ") | " + ("activation peak MiB, step / forward (tapegrad) | " if with_activations else "")
    + "result check (" + " / ".join(titles) + ") |",
    "|---|" + "---|" * (len(titles) + 3 + with_activations),
    *rows,
])
text = open(perf_path).read() if os.path.exists(perf_path) else "# Performance\n"
begin, end = f"<!-- BEGIN {marker} -->", f"<!-- END {marker} -->"
if begin in text:
    text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: begin + "\n" + table + "\n" + end, text,
                  flags=re.S)
else:
    text += f"\n{begin}\n{table}\n{end}\n"
open(perf_path, "w").write(text)
print(table)
