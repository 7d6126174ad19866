"""Turns the RESULT lines of bench/compare.sh into the table in docs/perf.md."""
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

rows = []
for bench in sorted({b for b, _ in runs}):
    tg, pt = runs.get((bench, "tapegrad")), runs.get((bench, "pytorch"))
    if not tg or not pt:
        continue
    def med(rs, key):
        vals = [r[key] for r in rs if key in r]
        return statistics.median(vals) if vals else None
    t, p = med(tg, "seconds"), med(pt, "seconds")
    unit = tg[0].get("unit", "")
    tv, pv = med(tg, "unit_value"), med(pt, "unit_value")
    higher_is_better = unit.endswith("/s")
    speedup = (tv / pv) if higher_is_better else (p / t)
    check = f"{tg[-1].get('check', '')} / {pt[-1].get('check', '')}"
    rows.append(f"| {bench} | {tv:.4g} {unit} | {pv:.4g} {unit} | {speedup:.2f}x | "
                f"{med(tg, 'peak_rss_mib'):.0f} / {med(pt, 'peak_rss_mib'):.0f} | {check} |")

table = "\n".join([
    f"Measured {datetime.date.today().isoformat()} on {platform.node()} ({platform.processor() or platform.machine()}) "
    f"at commit {commit()}, "
    f"median of {max(len(v) for v in runs.values())} alternating runs; PyTorch "
    f"{__import__('torch').__version__} with 2 threads; OPENBLAS_CORETYPE="
    f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')} (both use OpenBLAS for GEMM; PyTorch's conv2d uses oneDNN).",
    "",
    "| workload | tapegrad | PyTorch | speed-up (PyTorch time / tapegrad time) | peak RSS MiB (tg / pt) | result check (tg / pt) |",
    "|---|---|---|---|---|---|",
    *rows,
])
text = open(perf_path).read() if __import__("os").path.exists(perf_path) else "# Performance\n\n<!-- BEGIN bench/compare.sh -->\n<!-- END bench/compare.sh -->\n"
text = re.sub(r"<!-- BEGIN bench/compare.sh -->.*<!-- END bench/compare.sh -->",
              "<!-- BEGIN bench/compare.sh -->\n" + table + "\n<!-- END bench/compare.sh -->", text, flags=re.S)
open(perf_path, "w").write(text)
print(table)
