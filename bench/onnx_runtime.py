#!/usr/bin/env python3
"""tapegrad's ONNX exports run in ONNX Runtime (issue 37): lesson 02's MLP, lesson 03's
LeNet and the int8 MLP (tg_quantize_dynamic, written as QDQ), each

- exported by tg_onnx_export (bench/onnx_export.c, which also times tapegrad's own
  eval-mode inference and writes its inputs and outputs),
- run in ONNX Runtime against tapegrad's outputs: float32 within 1e-5 of the output's
  largest magnitude, int8 within one quantisation step of the output (its range / 255),
  at batch 1 and 64,
- and compared with PyTorch's torch.onnx.export of the twin model (bench/mlp_torch.py,
  bench/lenet_torch.py; the same weights from the same seed) run in ONNX Runtime too,

printing images/s at batch 1 and 64 for the three and a Markdown table (docs/onnx.md).

`--agreement` checks the outputs only, untimed, of every model the driver exports: the
three above at batch 1 and 64, and the other tutorials' models (lesson 13's ResNet-20,
lesson 08's DCGAN generator, lesson 09's LSTM language model with int64 ids [T, B], whose
free dim 0 is T, and lesson 12's static int8 LeNet, QDQ, with the lesson's qconfig "onednn" and with
"x86", whose activations take 7 bits) at batch 1 and 7, each input's
dtype and shape read from the driver's NAME.meta; one step of the static int8 LeNet's
output is its DeQuantize scale (NAME.meta too). Prints a Markdown table of the largest
error relative to the output's scale (float32: to its largest magnitude, tolerance 1e-5;
int8: in quantisation steps, tolerance 1). The static int8 models also run with ONNX
Runtime's graph optimisation at ORT_ENABLE_BASIC, which leaves QDQ as float ops instead
of fusing it into QLinearConv / QGemm (u8s8 integer kernels).
Rounds alternate the three so that a busy machine's noise falls on all of them; each
figure is the median over the rounds. A model the exporter cannot write yet (the
driver's NAME.error) is reported and skipped. Benchmark only: no test or CI stage
runs it.

    ./bazelw build --config=cpu_only //bench:onnx_export
    $(bench/peers/setup.sh) bench/onnx_runtime.py [--rounds 5] [--reps 200]
    $(bench/peers/setup.sh) bench/onnx_runtime.py --agreement

ONNX Runtime comes from PyPI in the peers' virtual environment (bench/peers/setup.sh);
PyPI's PyTorch 2 there exports with its newer exporter, so the twins are exported by
Debian's PyTorch 1.13 (/usr/bin/python3, --torch-python), which this script runs as
`--torch-export DIR`.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = [  # name, input shape without the batch, PyTorch twin (None: not exportable by torch.onnx)
    ("mlp", (784,), "mlp"),
    ("lenet", (1, 28, 28), "lenet"),
    # torch.onnx cannot export quantize_dynamic's int8 Linear: no PyTorch column
    ("mlp_int8", (784,), None),
]
CHECKED = ["resnet20", "dcgan_g", "lstm_lm", "gpt", "lenet_int8_static", "lenet_int8_static_x86"]  # --agreement only: NAME.meta says the input


def torch_export(out_dir):
    """Under a python with PyTorch: the twins, seeded as tapegrad's models, to ONNX."""
    import torch

    sys.path.insert(0, HERE)
    from lenet_torch import make_lenet
    from mlp_torch import make_mlp

    for name, make, shape in (("mlp", make_mlp, (1, 784)), ("lenet", make_lenet, (1, 1, 28, 28))):
        torch.manual_seed(1)
        model = make().eval()
        torch.onnx.export(model, torch.zeros(shape), os.path.join(out_dir, name + "_torch.onnx"),
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=17)
    print(f"torch {torch.__version__}")


def read(path, shape):
    import numpy as np
    return np.fromfile(path, dtype=np.float32).reshape(shape)


def median_per_s(run, batch, reps):
    run()  # warm-up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return batch / statistics.median(times)


def tapegrad_round(driver, out_dir, reps):
    """Runs the C driver: exports, inputs/outputs, and {(name, batch): images/s}."""
    proc = subprocess.run([driver, out_dir, str(reps)], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{driver} failed ({proc.returncode}):\n{proc.stderr}")
    rates = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT "):])
            m = re.fullmatch(r"(.+)_tapegrad_b(\d+)", r["bench"])
            rates[(m.group(1), int(m.group(2)))] = r["unit_value"]
    return rates, proc.stderr


def agreement(got, expected, int8, step=None):
    """(error, tolerance, ok): the largest difference against the tolerance."""
    import numpy as np
    err = float(np.abs(got.astype(np.float64) - expected).max())
    if step:  # one step of the output's quantisation (a static int8 model's DeQuantize scale)
        tol = step * 1.0001
    elif int8:  # one step of an 8-bit quantisation of the output's range
        tol = float(expected.max() - expected.min()) / 255
    else:
        tol = 1e-5 * max(float(np.abs(expected).max()), 1e-30)
    return err, tol, err <= tol


def check_agreement(driver, out_dir):
    """--agreement: every export in ONNX Runtime against tapegrad's outputs, untimed."""
    import numpy as np
    import onnxruntime as ort

    _, stderr = tapegrad_round(driver, out_dir, 1)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = len(os.sched_getaffinity(0))
    rows, status = [], 0
    models = [(name, "float32", (64,) + shape, 0.0) for name, shape, _ in MODELS]
    for name in CHECKED:
        meta = os.path.join(out_dir, name + ".meta")
        if not os.path.exists(meta):
            sys.exit(f"{name}: no {meta} (the driver failed?):\n{stderr}")
        dtype, shape, step = open(meta).read().split()
        models.append((name, dtype, tuple(int(d) for d in shape.split(",")), float(step)))
    for name, dtype, shape, step in models:
        path = os.path.join(out_dir, name + ".onnx")
        if not os.path.exists(path):
            with open(os.path.join(out_dir, name + ".error")) as f:
                print(f"{name}: not exported: {f.read().strip()}")
            rows.append((name, "—", None, None, "not exported"))
            status = 1
            continue
        x = np.fromfile(os.path.join(out_dir, name + "_x.bin"), dtype=dtype).reshape(shape)
        n = shape[0]
        y = {n: read(os.path.join(out_dir, name + "_y.bin"), (n, -1)),
             1: read(os.path.join(out_dir, name + "_y1.bin"), (1, -1))}
        int8 = "int8" in name
        levels = [("default", ort.GraphOptimizationLevel.ORT_ENABLE_ALL)]
        if step:  # static QDQ: also unfused
            levels.append(("ORT_ENABLE_BASIC", ort.GraphOptimizationLevel.ORT_ENABLE_BASIC))
        for level_name, level in levels:
            opts.graph_optimization_level = level
            s = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            feed = s.get_inputs()[0]
            label = name if level_name == "default" else f"{name} ({level_name})"
            for batch in (1, n):
                got = s.run(None, {feed.name: np.ascontiguousarray(x[:batch])})[0].reshape(batch, -1)
                err, tol, ok = agreement(got, y[batch], int8, step)
                scale = tol / 1.0001 if step else (tol if int8 else tol / 1e-5)
                status |= not ok
                print(f"{label} ({feed.type}) batch {batch}: max |ONNX Runtime - tapegrad| {err:.2e}, "
                      f"{err / scale:.2e} of {'a quantisation step' if int8 else 'the largest |output|'} "
                      f"{scale:.3e} (tolerance {tol:.2e}) {'ok' if ok else 'MISMATCH'}")
                rows.append((label, batch, err / scale, "steps" if int8 else "of max abs", "yes" if ok else "NO"))
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    print("\n| model | batch | max error / output scale | agree | ONNX Runtime | date |")
    print("|---|---:|---:|---|---|---|")
    for name, batch, rel, unit, ok in rows:
        rel_text = "—" if rel is None else f"{rel:.1e} {unit}"
        print(f"| {name} | {batch} | {rel_text} | {ok} | {ort.__version__} | {datetime.date.today()} |")
    print(f"\nfiles: {out_dir}")
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--torch-export", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--driver", default=os.path.join(ROOT, "bazel-bin/bench/onnx_export"))
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=200, help="timed runs at batch 1 (a quarter at 64)")
    ap.add_argument("--out", help="where the files go (default: a temporary folder)")
    ap.add_argument("--agreement", action="store_true",
                    help="only check every export's outputs in ONNX Runtime (no timing)")
    args = ap.parse_args()
    if args.torch_export:
        return torch_export(args.torch_export)

    import numpy as np
    import onnxruntime as ort

    if not os.access(args.driver, os.X_OK):
        sys.exit(f"{args.driver}: not built (./bazelw build --config=cpu_only //bench:onnx_export)")
    out_dir = args.out or tempfile.mkdtemp(prefix="tg_onnx_bench_")
    os.makedirs(out_dir, exist_ok=True)
    driver = shutil.copy2(args.driver, os.path.join(out_dir, "onnx_export"))  # a build meanwhile moves bazel-bin
    if args.agreement:
        return check_agreement(driver, out_dir)
    threads = len(os.sched_getaffinity(0))  # what tapegrad's pool takes
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1

    proc = subprocess.run([args.torch_python, os.path.abspath(__file__), "--torch-export", out_dir],
                          capture_output=True, text=True)
    torch_version = proc.stdout.strip().split()[-1] if proc.returncode == 0 else None
    if torch_version is None:
        print(f"PyTorch's export failed ({args.torch_python}); no PyTorch column:\n{proc.stderr[-2000:]}")

    rates = {}  # (name, impl, batch) -> [images/s per round]
    sessions, checked, status = {}, {}, 0
    for rnd in range(args.rounds):
        tg_rates, stderr = tapegrad_round(driver, out_dir, args.reps)
        for (name, batch), v in tg_rates.items():
            rates.setdefault((name, "tapegrad", batch), []).append(v)
        for name, shape, twin in (MODELS if rnd % 2 == 0 else MODELS[::-1]):
            files = {"ort": os.path.join(out_dir, name + ".onnx")}
            if twin and torch_version:
                files["ort-torch"] = os.path.join(out_dir, twin + "_torch.onnx")
            if not os.path.exists(files["ort"]):
                if rnd == 0:
                    with open(os.path.join(out_dir, name + ".error")) as f:
                        print(f"{name}: not exported: {f.read().strip()}")
                checked[name] = None
                continue
            x = read(os.path.join(out_dir, name + "_x.bin"), (64,) + shape)
            y = {64: read(os.path.join(out_dir, name + "_y.bin"), (64, -1)),  # tapegrad's outputs at batch 64
                 1: read(os.path.join(out_dir, name + "_y1.bin"), (1, -1))}   # and 1 (int8: the batch's scales)
            for impl, path in (files.items() if rnd % 2 == 0 else list(files.items())[::-1]):
                key = (name, impl)
                if key not in sessions:
                    sessions[key] = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
                s = sessions[key]
                feed_name = s.get_inputs()[0].name
                for batch in (1, 64):
                    xb = np.ascontiguousarray(x[:batch])
                    if rnd == 0:  # the outputs agree with tapegrad's
                        got = s.run(None, {feed_name: xb})[0].reshape(batch, -1)
                        err, tol, ok = agreement(got, y[batch], name.endswith("int8"))
                        checked.setdefault(name, []).append(ok)
                        status |= not ok
                        print(f"{name} {impl:9s} batch {batch:2d}: max |ONNX Runtime - tapegrad| {err:.2e} "
                              f"(tolerance {tol:.2e}) {'ok' if ok else 'MISMATCH'}")
                    reps = args.reps if batch == 1 else max(args.reps // 4, 1)
                    v = median_per_s(lambda: s.run(None, {feed_name: xb}), batch, reps)
                    rates.setdefault((name, impl, batch), []).append(v)
        print(f"round {rnd + 1}/{args.rounds} done", flush=True)

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    print(f"\n{datetime.date.today()}, {cpu}, {threads} threads (tapegrad's pool; ONNX Runtime "
          f"intra_op_num_threads={threads}), ONNX Runtime {ort.__version__}, PyTorch export {torch_version}, "
          f"median of {args.rounds} alternating rounds\n")
    print("| model | batch | tapegrad (images/s) | ONNX Runtime, tapegrad's file | ONNX Runtime, PyTorch's file "
          "| ORT(tapegrad's) / tapegrad | ORT(tapegrad's) / ORT(PyTorch's) | outputs agree |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, _, twin in MODELS:
        for batch in (1, 64):
            tg = statistics.median(rates.get((name, "tapegrad", batch), [float("nan")]))
            if checked.get(name) is None:
                print(f"| {name} | {batch} | {tg:,.0f} | not exported yet | | | | |")
                continue
            o = statistics.median(rates[(name, "ort", batch)])
            t = statistics.median(rates[(name, "ort-torch", batch)]) if (name, "ort-torch", batch) in rates else None
            agree = "yes" if all(checked[name]) else "NO"
            print(f"| {name} | {batch} | {tg:,.0f} | {o:,.0f} | {f'{t:,.0f}' if t else '—'} | {o / tg:.2f} | "
                  f"{f'{o / t:.2f}' if t else '—'} | {agree} |")
    print(f"\nfiles: {out_dir}")
    return status


if __name__ == "__main__":
    sys.exit(main())
