"""The "impl" label of a PyTorch twin's RESULT line: Debian's PyTorch 1.13 is
"pytorch", PyTorch 2 from bench/peers/setup.sh is "pytorch2" (eager) or
"pytorch2-compile" (torch.compile); bench/report.py puts each in its own column."""
import torch


def impl_name(compiled=False):
    name = "pytorch" if int(torch.__version__.split(".")[0]) < 2 else "pytorch2"
    return name + ("-compile" if compiled else "")
