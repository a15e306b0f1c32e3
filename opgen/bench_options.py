"""The options of an op's benchmark, declared once.

``opgen bench <op> [OPTIONS]`` and the generated ``bench_<op>.py`` (``opgen.bench.bench_main``)
take the same options: this parser is both. The CLI checks them here (a bad option is bad usage,
exit 2, before anything runs), makes their paths absolute and hands them to the benchmark's
process, which parses them again with the same parser. No torch here: the CLI starts fast.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Sequence
from pathlib import Path

DTYPES = ("float32", "bfloat16", "float16", "float64")
DEFAULT_DTYPES = ("float32", "bfloat16")
PATH_OPTIONS = ("json", "plot", "markdown")  # written by the benchmark: absolute before they travel


def parser(op: str = "<op>", default_device: str | None = None) -> argparse.ArgumentParser:
    """The benchmark's options; ``default_device`` None: cuda where a GPU is found, else cpu."""
    options = argparse.ArgumentParser(
        prog=f"opgen bench {op}",
        description=f"Benchmark {op} against PyTorch eager, torch.compile and a device copy.",
        allow_abbrev=False,
    )
    options.add_argument(
        "--device", choices=["cuda", "cpu"], default=default_device, help="default: cuda when a GPU is found, else cpu"
    )
    options.add_argument(
        "--dtype", action="append", choices=DTYPES, help=f"repeatable; default: the benchmark's own ({' and '.join(DEFAULT_DTYPES)}; bfloat16 for linear ops)"
    )
    options.add_argument("--json", type=Path, help="write the measurements and the environment as JSON here")
    options.add_argument("--plot", type=Path, help="write a PNG of GB/s against size here")
    options.add_argument("--markdown", type=Path, help="write a markdown table of GB/s and %% of copy here")
    options.add_argument(
        "--no-compile", action="store_true", help="leave torch.compile out (it compiles for minutes on a CPU)"
    )
    options.add_argument(
        "--repetitions", type=int, default=50, help="timed calls per measurement; the median is reported"
    )
    return options


def forwarded(op: str, args: Sequence[str]) -> list[str]:
    """``args`` checked against the options (SystemExit 2 with usage if wrong), paths made absolute."""
    options = parser(op)
    parsed = options.parse_args(list(args))
    # The plot is drawn after every measurement: a missing matplotlib is said now, not minutes later.
    if parsed.plot is not None and importlib.util.find_spec("matplotlib") is None:
        options.error("--plot needs matplotlib, which this Python lacks: python3 -m pip install matplotlib")
    argv: list[str] = []
    for action in options._actions:
        if not action.option_strings or action.dest == "help":
            continue
        value = getattr(parsed, action.dest)
        flag = action.option_strings[0]
        if value is None or value is False or (value == action.default and not isinstance(value, bool)):
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            for item in value:
                argv += [flag, str(item)]
        elif action.dest in PATH_OPTIONS:
            argv += [flag, str(Path(value).resolve())]
        else:
            argv += [flag, str(value)]
    return argv
