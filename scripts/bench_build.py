#!/usr/bin/env python
"""Build-time benchmark of `opgen build`: the acceptance figures of issue 4, measured on this machine.

    python scripts/bench_build.py [--arch 9.0] [--out docs/benchmarks/build.md] [--cpu-only]

Each figure times a whole command (`python -m opgen build ...`, start-up and torch import
included) with a monotonic clock, and records the CPU seconds of everything it ran (from the OS
accounting of waited-for children), which a busy shared machine disturbs less than wall time:

  a. a cold `opgen build softmax` (CPU and CUDA sources, one architecture) against a minimal lean
     extension (one trivial kernel, ATen core headers, TORCH_LIBRARY, no pybind11) built with
     torch's BuildExtension in the same run, same architecture, jobs and -O3;
  b. a cold CPU-only build of one op (softmax);
  c. in a workspace of five ops built with CUDA, softmax_cuda.cu touched: the translation units
     recompiled (ninja's own lines in `opgen build -v`) and the rebuild's wall time against that
     file's compile time (ninja's log of that very rebuild);
  d. a rebuild of that workspace with nothing changed (median of five runs);
  e. a workspace where one op has a syntax error (CPU only, to bound the run): exit code, the
     summary's line for the broken op, and the other ops importing and computing;
  f. `opgen dev softmax` in a fresh process once its JIT build is cached, nothing changed (median
     of five runs; CUDA and CPU sources, or CPU only under --cpu-only).

It prints a table and writes it, with the machine and the command, to --out. ``--cpu-only``
skips a, and runs c and d on a CPU-only workspace; ``--only e`` (any of the letters) runs only
those checks: quick checks of the script itself, with --out elsewhere.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from opgen.build import default_jobs  # noqa: E402
from opgen.toolchain import find_cuda_toolkit  # noqa: E402

# What a. measures and why it can miss; printed under the notes whenever a. ran.
READING_A = (
    "Reading a.: the cold softmax build compiles four files, the lean extension one (the notes give "
    "each file's span from ninja's log). softmax_cuda.cu holds only the kernels and includes no torch "
    "tensor or dispatcher header: nvcc parses every header twice (host and device passes), and those "
    "headers are most of a small .cu file's compile time. The checks and the registration "
    "(softmax_cuda_binding.cpp) compile with the C++ compiler on the other core, beside nvcc. "
    "opgen starts the CUDA files first, so that the C++ files compile beside them instead of before them."
)

FIVE_OPS = {"softmax": None, "relu": None, "gelu": None, "my_op": "elementwise", "row_op": "rowwise"}

LEAN_KERNEL = r"""// The smallest useful CUDA op: one kernel, ATen core headers, registered with TORCH_LIBRARY.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

namespace {

__global__ void add_one_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

at::Tensor add_one(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.is_contiguous(), "add_one: contiguous float32 CUDA");
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  int64_t n = x.numel();
  if (n > 0) {
    add_one_kernel<<<(n + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return y;
}

}  // namespace

TORCH_LIBRARY(lean_ext, m) { m.def("add_one(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(lean_ext, CUDA, m) { m.impl("add_one", &add_one); }
"""

LEAN_SETUP = """from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="lean_ext",
    ext_modules=[
        CUDAExtension(
            "lean_ext._C",
            ["lean.cu"],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3"]},
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
"""


@dataclass
class Timed:
    wall_s: float
    cpu_s: float
    returncode: int
    output: str


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> Timed:
    """Run ``command`` to its end; its wall time and the CPU time of all it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(wall, cpu, result.returncode, result.stdout + result.stderr)


def opgen(*args: str) -> list[str]:
    return [sys.executable, "-m", "opgen", *args]


def must(step: str, result: Timed | subprocess.CompletedProcess[str]) -> None:
    if result.returncode != 0:
        output = result.output if isinstance(result, Timed) else result.stdout + result.stderr
        sys.exit(f"bench_build: {step} failed (exit {result.returncode}):\n{output[-4000:]}")


def new_workspace(root: Path, ops: dict[str, str | None], env: dict[str, str]) -> Path:
    workspace = root / "generated_ops"
    for op, kind in ops.items():
        result = subprocess.run(
            opgen("new", op, "-w", str(workspace), *(["--kind", kind] if kind else [])),
            env=env,
            capture_output=True,
            text=True,
        )
        must(f"opgen new {op}", result)
    return workspace


def ninja_schedule(build_root: Path) -> str:
    """Each object of the ninja runs under ``build_root`` ("name start-end s") and their sum, from ninja's log."""
    spans, total_ms = [], 0
    for log in build_root.glob("build/temp.*/.ninja_log"):
        for line in log.read_text().splitlines():
            fields = line.split("\t")
            if len(fields) >= 4 and fields[0].isdigit():
                spans.append(f"{Path(fields[3]).name} {int(fields[0]) / 1000:.1f}-{int(fields[1]) / 1000:.1f} s")
                total_ms += int(fields[1]) - int(fields[0])
    return f"{', '.join(spans)} (compile time summed over files: {total_ms / 1000:.1f} s)"


def ninja_compile_ms(workspace: Path, object_suffix: str) -> float | None:
    """How long ninja's last compile of the object ending in ``object_suffix`` took (its .ninja_log)."""
    durations = []
    for log in workspace.glob("build/temp.*/.ninja_log"):
        for line in log.read_text().splitlines():
            fields = line.split("\t")
            if len(fields) >= 4 and fields[3].endswith(object_suffix):
                durations.append(int(fields[1]) - int(fields[0]))
    return durations[-1] if durations else None


def ninja_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(r"^\[\d+/\d+\] ", line)]


def machine() -> list[str]:
    model = "unknown CPU"
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    compiler = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    toolkit = find_cuda_toolkit()
    ninja = subprocess.run(["ninja", "--version"], capture_output=True, text=True).stdout.strip()
    gpus = ""
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
        gpus = ", ".join(subprocess.run(query, capture_output=True, text=True).stdout.split("\n")[:1]).strip()
    return [
        f"{os.cpu_count()} cores ({model}), {memory_gib:.0f} GiB memory, {gpus or 'no GPU'}",
        f"Python {platform.python_version()}, torch {importlib.metadata.version('torch')}, "
        f"CUDA toolkit {toolkit.version if toolkit else 'none'} ({toolkit.home if toolkit else '-'}), "
        f"{compiler[0] if compiler else 'c++ unknown'}, ninja {ninja}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="9.0", help="the one CUDA architecture to build (default 9.0)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "build.md")
    parser.add_argument("--cpu-only", action="store_true", help="skip the CUDA figures (a quick self-check)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspaces")
    parser.add_argument("--only", default="abcdef", help="run only these checks, e.g. 'e' (default: all)")
    options = parser.parse_args()

    toolkit = None if options.cpu_only else find_cuda_toolkit()
    if not options.cpu_only and toolkit is None:
        sys.exit("bench_build: no CUDA toolkit found; set CUDA_HOME, or pass --cpu-only")
    jobs = default_jobs(with_cuda=toolkit is not None)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("TORCH_CUDA_ARCH_LIST", None)
    cuda_flags = [] if toolkit is None else ["--arch", options.arch]
    scratch = Path(tempfile.mkdtemp(prefix="opgen-bench-build-"))
    rows: list[tuple[str, str, str, str]] = []  # (check, figure, target, met)
    notes: list[str] = []

    def row(check: str, figure: str, target: str = "", met: bool | None = None) -> None:
        rows.append((check, figure, target, "" if met is None else ("yes" if met else "**no**")))
        print(f"{check:<62} {figure:<44} {target:<8} {rows[-1][3]}", flush=True)

    try:
        # a. cold softmax against a minimal lean extension
        if toolkit is not None and "a" in options.only:
            lean = scratch / "lean"
            (lean / "lean_ext").mkdir(parents=True)
            (lean / "lean_ext" / "__init__.py").write_text("")
            (lean / "lean.cu").write_text(LEAN_KERNEL)
            (lean / "setup.py").write_text(LEAN_SETUP)
            lean_env = {
                **env,
                "CUDA_HOME": str(toolkit.home),
                "TORCH_CUDA_ARCH_LIST": options.arch,
                "MAX_JOBS": str(jobs),
            }
            lean_build = timed([sys.executable, "setup.py", "build_ext", "--inplace"], lean, lean_env)
            must("the lean extension's build", lean_build)
            workspace_a = new_workspace(scratch / "a", {"softmax": None}, env)
            cold = timed(opgen("build", "softmax", *cuda_flags, "-w", str(workspace_a)), scratch / "a", env)
            must("cold opgen build softmax", cold)
            assert f"CUDA architectures {options.arch}" in cold.output, cold.output[-2000:]
            row(
                "a. cold `opgen build softmax` (CPU+CUDA, 4 sources)",
                f"{cold.wall_s:.1f} s wall, {cold.cpu_s:.1f} s CPU",
            )
            row(
                "a. minimal lean extension (1 kernel, 1 source)",
                f"{lean_build.wall_s:.1f} s wall, {lean_build.cpu_s:.1f} s CPU",
            )
            wall_ratio, cpu_ratio = cold.wall_s / lean_build.wall_s, cold.cpu_s / lean_build.cpu_s
            notes.append(f"a. the cold softmax build's files, from ninja's log: {ninja_schedule(workspace_a)}")
            notes.append(f"a. the lean extension's file, from ninja's log: {ninja_schedule(lean)}")
            row("a. ratio softmax / lean", f"{wall_ratio:.2f} wall, {cpu_ratio:.2f} CPU", "≤ 1.5", wall_ratio <= 1.5)

        # b. CPU-only cold build of one op
        if "b" in options.only:
            check_cpu_only(scratch, env, row)

        # c. five ops, one source touched; d. nothing changed
        if "c" in options.only or "d" in options.only:
            check_incremental(scratch, env, row, notes, toolkit is not None, options.arch, "c" in options.only)

        # e. one op with a syntax error
        if "e" in options.only:
            check_isolation(scratch, env, row, notes)

        # f. opgen dev reusing its cached JIT build
        if "f" in options.only:
            check_dev_reuse(scratch, env, row, notes, cuda_flags)
    finally:
        if options.keep:
            print(f"workspaces kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    command = "python scripts/bench_build.py" + (" --cpu-only" if options.cpu_only else f" --arch {options.arch}")
    command += f" --only {options.only}" if options.only != "abcdef" else ""
    write_report(options.out, rows, notes, command, jobs, options.arch if toolkit else None)
    print(f"wrote {options.out}")


Row = Callable[..., None]


def check_dev_reuse(scratch: Path, env: dict[str, str], row: Row, notes: list[str], cuda_flags: list[str]) -> None:
    workspace_f = new_workspace(scratch / "f", {"softmax": None}, env)
    mode = cuda_flags or ["--cpu-only"]
    command = opgen("dev", "softmax", *mode, "-w", str(workspace_f))
    must("the first opgen dev softmax (a JIT build)", timed(command, scratch / "f", env))
    runs = [timed(command, scratch / "f", env) for _ in range(5)]
    for run in runs:
        must("opgen dev softmax, reusing its build", run)
        assert "reused" in run.output, run.output[-2000:]
    walls = [run.wall_s for run in runs]
    median = statistics.median(walls)
    row(
        "f. `opgen dev softmax` reusing its cached build (fresh process)",
        f"{median:.2f} s wall (median of 5; min {min(walls):.2f}, max {max(walls):.2f})",
        "< 3 s",
        median < 3,
    )
    notes.append(f"f. its line: `{next(line for line in runs[0].output.splitlines() if 'reused' in line).strip()}`")


def check_cpu_only(scratch: Path, env: dict[str, str], row: Row) -> None:
    workspace_b = new_workspace(scratch / "b", {"softmax": None}, env)
    cpu_build = timed(opgen("build", "softmax", "--cpu-only", "-w", str(workspace_b)), scratch / "b", env)
    must("CPU-only opgen build softmax", cpu_build)
    row(
        "b. cold CPU-only `opgen build softmax`",
        f"{cpu_build.wall_s:.1f} s wall, {cpu_build.cpu_s:.1f} s CPU",
        "≤ 25 s",
        cpu_build.wall_s <= 25,
    )


def check_incremental(
    scratch: Path, env: dict[str, str], row: Row, notes: list[str], with_cuda: bool, arch: str, touch: bool
) -> None:
    cuda_flags = ["--arch", arch] if with_cuda else []
    cpu_flag = [] if with_cuda else ["--cpu-only"]
    workspace_c = new_workspace(scratch / "c", FIVE_OPS, env)
    first = timed(opgen("build", *cpu_flag, *cuda_flags, "-w", str(workspace_c)), scratch / "c", env)
    must("the five-op build", first)
    row(
        f"c. cold build of five ops ({'CPU+CUDA' if with_cuda else 'CPU only'})",
        f"{first.wall_s:.1f} s wall, {first.cpu_s:.1f} s CPU",
    )
    touched = "softmax/csrc/softmax_cuda.cu" if with_cuda else "softmax/csrc/softmax_cpu.cpp"
    if touch:
        (workspace_c / touched).touch()
        rebuild = timed(opgen("build", "-v", *cpu_flag, *cuda_flags, "-w", str(workspace_c)), scratch / "c", env)
        must("the rebuild after a touch", rebuild)
        compiled = ninja_lines(rebuild.output)
        exactly_one = len(compiled) == 1 and Path(touched).name in compiled[0]
        row(
            f"c. translation units recompiled after touching {Path(touched).name}", str(len(compiled)), "1", exactly_one
        )
        for line in compiled:
            source = re.search(r"\s-c\s+([^-\s]\S*)", line)
            notes.append(
                f"c. ninja's line in the rebuild: `{line.split(' ', 1)[0]} ... -c {source.group(1) if source else '?'} ...`"
            )
        compile_ms = ninja_compile_ms(workspace_c, Path(touched).with_suffix(".o").as_posix())
        if compile_ms:
            ratio = rebuild.wall_s / (compile_ms / 1000)
            row(
                "c. rebuild wall / that file's compile (ninja log)",
                f"{rebuild.wall_s:.1f} s / {compile_ms / 1000:.1f} s = {ratio:.2f}",
                "≤ 1.2",
                ratio <= 1.2,
            )
        summary_lines = [
            line for line in rebuild.output.splitlines() if re.match(r"^ (softmax|relu|gelu|my_op|row_op) ", line)
        ]
        notes.append("c. the rebuild's summary: " + "; ".join(" ".join(line.split()) for line in summary_lines))

    # d. nothing changed
    no_change = [
        timed(opgen("build", *cpu_flag, *cuda_flags, "-w", str(workspace_c)), scratch / "c", env) for _ in range(5)
    ]
    for result in no_change:
        must("the no-change rebuild", result)
    assert "nothing to compile" in no_change[-1].output, no_change[-1].output
    walls = sorted(result.wall_s for result in no_change)
    median = statistics.median(walls)
    row(
        "d. no-change rebuild of five ops (median of 5)",
        f"{median:.2f} s wall (min {walls[0]:.2f}, max {walls[-1]:.2f})",
        "< 3 s",
        median < 3,
    )


def check_isolation(scratch: Path, env: dict[str, str], row: Row, notes: list[str]) -> None:
    workspace_e = new_workspace(scratch / "e", {"relu": None, "gelu": None, "broken": "elementwise"}, env)
    broken_source = workspace_e / "broken" / "csrc" / "broken_cpu.cpp"
    broken_source.write_text(broken_source.read_text() + "\nthis line is not C++\n")
    isolated = timed(opgen("build", "--cpu-only", "-w", str(workspace_e)), scratch / "e", env)
    # After the summary's table, each failed op's first error has a line of its own.
    broken_line = next(
        (line for line in isolated.output.splitlines() if line.startswith("broken: ") and "error" in line), ""
    )
    probe = (
        "import warnings, torch\nwarnings.simplefilter('ignore')\nimport generated_ops as g\n"
        "x = torch.tensor([-1.0, 0.5])\n"
        "assert g.relu(x).tolist() == [0.0, 0.5]\n"
        "torch.testing.assert_close(g.gelu(x), torch.nn.functional.gelu(x))\n"
        "assert g.built_ops == ['gelu', 'relu'] and g.unbuilt_ops == ['broken'], (g.built_ops, g.unbuilt_ops)\n"
    )
    imported = subprocess.run([sys.executable, "-c", probe], cwd=scratch / "e", env=env, capture_output=True, text=True)
    named = broken_line.startswith("broken: broken/csrc/broken_cpu.cpp:") and "error" in broken_line
    row("e. exit code with one broken op", str(isolated.returncode), "1", isolated.returncode == 1)
    row("e. summary names the broken op with its first error", "yes" if named else "no", "yes", named)
    row(
        "e. the other ops build, import and compute",
        "yes" if imported.returncode == 0 else "no",
        "yes",
        imported.returncode == 0,
    )
    notes.append(f"e. the broken op's line in the summary: `{broken_line}`")
    if imported.returncode != 0:
        notes.append(f"import probe failed: {imported.stderr.strip().splitlines()[-1:]}")


def write_report(
    out: Path, rows: list[tuple[str, str, str, str]], notes: list[str], command: str, jobs: int, arch: str | None
) -> None:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Build times",
        "",
        f"Measured by `{command}` on {date}, {jobs} parallel compile jobs (opgen's default here)"
        + (f", CUDA architecture {arch}." if arch else ", CPU only."),
        "",
        *(f"- {line}" for line in machine()),
        "- The machine's cores are shared with other work, so wall times carry noise; each figure also",
        "  gives the CPU seconds of everything the command ran, which sharing disturbs less.",
        "",
        "| check | figure | target | met |",
        "|---|---|---|---|",
        *(f"| {check} | {figure} | {target} | {met} |" for check, figure, target, met in rows),
        "",
        "Notes:",
        "",
        *(f"- {note}" for note in notes),
        "",
        *([READING_A, ""] if any(check.startswith("a.") for check, *_ in rows) else []),
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
