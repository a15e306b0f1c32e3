"""`opgen build`: compile the workspace's ops in place by running its setup.py with ninja.

setup.py imports torch and setuptools, which alone takes seconds. So before starting it, opgen
asks the workspace's ``_build_config.py`` (the file setup.py decides with, loaded here without
torch) whether each op is up to date, and hands setup.py only the ops that are not: a build with
nothing to do ends in about a second. Both sides read that one file, so they cannot disagree.

While setup.py runs, its output is read line by line: the JSON progress events it prints
(``event_line`` in _build_config.py) and ninja's ``[n/N]`` lines become BuildEvents (an op compiling, which file it compiled,
linking, done) for a live display on a terminal or plain lines in a CI log.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import math
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, TypeVar

from rich.console import Console, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from opgen.errors import BuildFailed, InvalidArch
from opgen.rules import INTERFACE, RULES_FILE, BuildRules, BuildSettings, opgen_rules, workspace_rules
from opgen.toolchain import CudaToolkit, find_cuda_toolkit
from opgen.workspace import Workspace

T = TypeVar("T")

# Peak memory of one compile job: nvcc on torch's ATen headers takes about 1.5-2 GB, g++ on the
# same headers about half that. Jobs beyond what memory holds would swap or get OOM-killed.
GIB_PER_CUDA_JOB = 2.0
GIB_PER_CXX_JOB = 1.0

# The workspace file that decides what a build compiles and when an op is up to date.
BUILD_CONFIG_FILE = RULES_FILE

# gcc/clang "file:12:5: error: ...", nvcc "file(41): error: ...", and "fatal error: ...".
_COMPILER_ERROR = re.compile(r"\berror\s*:", re.IGNORECASE)

# ninja's status line for a finished edge (it prints them when stdout is no terminal), and the
# source a compile command compiles.
_NINJA_STATUS = re.compile(r"^\[(\d+)/(\d+)\]\s+(.*)$")
_COMPILED_SOURCE = re.compile(r"\s-c\s+([^-\s]\S*)")  # torch writes "-c -c <source>" for C++

# A compute capability as TORCH_CUDA_ARCH_LIST writes it: 9.0, 10.0, 9.0a, 10.0f, 8.6+PTX.
_ARCH = re.compile(r"\d{1,2}\.\d[af]?(\+PTX)?")
# torch also takes architecture names ("Hopper", "Ampere+Tegra") and "native"; it checks the
# names itself, so only their shape is checked here.
_ARCH_NAME = re.compile(r"native|[A-Z][a-z]+(\+[A-Z][a-z]+)?")


@dataclass(frozen=True)
class OpOutcome:
    """One op's result: built, up-to-date or failed (with its first compiler error).

    ``compiled`` names the translation units this build compiled (ninja recompiles only those
    whose sources or included headers changed; none when the op was only relinked).
    """

    op: str
    status: str
    seconds: float
    first_error: str = ""
    compiled: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildReport:
    """What a build did: each op's outcome, in which mode, how long it took, and its full log.

    ``architectures`` is the CUDA architecture list the ops were built for (None for a CPU-only
    build, or when the workspace's setup.py did not say); ``ran_setup`` is False when every op
    was found up to date without running setup.py.
    """

    ops: list[str]
    mode: str
    toolkit: CudaToolkit | None
    seconds: float
    log: str
    outcomes: list[OpOutcome]
    architectures: str | None = None
    jobs: int = 1
    ran_setup: bool = True

    @property
    def failed(self) -> list[OpOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status == "failed"]


@dataclass(frozen=True)
class BuildEvent:
    """A step of one op's build, as it happens.

    ``phase`` is "queued", "compiling", "linking", or a final status ("built", "up-to-date",
    "failed", with ``seconds``). While compiling, ``detail`` names the file ninja has just
    compiled and its count ("softmax_cuda.cu (2/3)").
    """

    op: str
    phase: str
    detail: str = ""
    seconds: float | None = None


# ---------------------------------------------------------------------------------------------
# Jobs and architectures


def usable_cores() -> int:
    """The processors this process may run on, within its CPU affinity and cgroup quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def _cgroup_memory_left() -> int | None:
    """Bytes this cgroup may still allocate (v2, else v1); None when it has no limit."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit_text = Path(limit_file).read_text().strip()
            if limit_text == "max":
                return None
            limit, usage = int(limit_text), int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        return None if limit >= 2**60 else max(0, limit - usage)  # v1 writes "no limit" as a huge number
    return None


def available_memory_gib() -> float | None:
    """Memory free for new processes now (MemAvailable, within any cgroup limit), in GiB."""
    available: int | None = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return None
    cgroup_left = _cgroup_memory_left()
    if cgroup_left is not None:
        available = min(available, cgroup_left)
    return available / 2**30


def default_jobs(with_cuda: bool = True) -> int:
    """Parallel compile jobs: one per usable core, as many as free memory holds (at least one)."""
    cores = usable_cores()
    memory_gib = available_memory_gib()
    if memory_gib is None:
        return cores
    per_job = GIB_PER_CUDA_JOB if with_cuda else GIB_PER_CXX_JOB
    return max(1, min(cores, int(memory_gib // per_job)))


def split_arch_list(value: str) -> list[str]:
    """The entries of an architecture list written with ';', ',' or spaces between them."""
    return [entry for entry in re.split(r"[;,\s]+", value.strip()) if entry]


def parse_arch_list(value: str, source: str = "--arch") -> str:
    """``value`` ("9.0", "8.0,9.0", "8.0 9.0+PTX") written as TORCH_CUDA_ARCH_LIST takes it ("8.0;9.0").

    InvalidArch when an entry is no architecture.
    """
    entries = split_arch_list(value)
    if not entries:
        raise InvalidArch(value=value, source=source, reason="it names no architecture")
    for entry in entries:
        if not (_ARCH.fullmatch(entry) or _ARCH_NAME.fullmatch(entry)):
            raise InvalidArch(value=value, source=source, reason=f"{entry!r} is no compute capability")
    return ";".join(entries)


# ---------------------------------------------------------------------------------------------
# The workspace's build configuration


def _torch_has_cuda(config: BuildRules | None) -> bool:
    """Whether torch is a CUDA build, read without importing torch where the workspace can."""
    if config is not None:
        try:
            return config.torch_build()[1] is not None
        except Exception:  # an unreadable torch falls back to importing it
            pass
    import torch

    return torch.version.cuda is not None


def build_env(
    ops: list[str],
    *,
    cpu_only: bool,
    jobs: int | None,
    arch: str | None = None,
    config: BuildRules | None = None,
) -> tuple[dict[str, str], CudaToolkit | None]:
    """The environment setup.py runs in: the ops, jobs, CUDA toolkit (or OPGEN_CUDA=0), architectures.

    InvalidArch for an architecture list nvcc cannot take.
    """
    env = dict(os.environ)
    env["OPGEN_OPS"] = ",".join(ops)
    chosen_arch = parse_arch_list(arch, "--arch") if arch is not None else None  # checked even when unused
    toolkit = None if cpu_only or not _torch_has_cuda(config) else find_cuda_toolkit(env)
    env["MAX_JOBS"] = str(jobs or default_jobs(with_cuda=toolkit is not None))
    if toolkit is None:
        env["OPGEN_CUDA"] = "0"
    else:
        env["CUDA_HOME"] = str(toolkit.home)
        env["PATH"] = f"{toolkit.home / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        if chosen_arch is not None:
            env["TORCH_CUDA_ARCH_LIST"] = chosen_arch
        elif env.get("TORCH_CUDA_ARCH_LIST"):
            env["TORCH_CUDA_ARCH_LIST"] = parse_arch_list(env["TORCH_CUDA_ARCH_LIST"], "TORCH_CUDA_ARCH_LIST")
    return env, toolkit


@dataclass(frozen=True)
class BuildSetup:
    """What a build of the workspace runs with, worked out in one place for build, list and dev.

    ``config`` is the workspace's _build_config.py (None: it has none, or it fails to load);
    ``env`` the environment setup.py runs in, its TORCH_CUDA_ARCH_LIST the one ``settings``
    resolved; ``toolkit`` the CUDA toolkit the kernels compile with (None: CPU kernels only);
    ``settings`` the config's Settings under ``env``, None where they cannot be worked out here
    (no config, or it raised: ``problem`` says what).
    """

    config: BuildRules | None
    env: dict[str, str]
    toolkit: CudaToolkit | None
    settings: BuildSettings | None
    problem: str = ""


def build_setup(
    workspace: Workspace,
    ops: list[str],
    *,
    cpu_only: bool = False,
    jobs: int | None = None,
    arch: str | None = None,
) -> BuildSetup:
    """The configuration, environment, toolkit and settings a build of ``ops`` would use now.

    InvalidArch or CudaToolkitNotFound as build_env raises them.
    """
    config = workspace_rules(workspace.path)
    env, toolkit = build_env(ops, cpu_only=cpu_only, jobs=jobs, arch=arch, config=config)
    if config is None:
        return BuildSetup(config, env, toolkit, None, f"no loadable {BUILD_CONFIG_FILE} of interface {INTERFACE}")
    try:
        settings = config.resolve(env)
    except Exception as error:  # the user's edited file, or an environment it refuses
        return BuildSetup(config, env, toolkit, None, str(error) or type(error).__name__)
    if settings.cuda_arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = settings.cuda_arch_list  # resolved once, here: setup.py gets the same
    if not settings.with_cuda:
        toolkit = None  # e.g. OPGEN_CUDA=0 in the environment: setup.py compiles no CUDA with it
    return BuildSetup(config, env, toolkit, settings)


def stale_ops(workspace: Workspace, ops: Iterable[str], config: BuildRules, settings: BuildSettings) -> list[str]:
    """The ``ops`` that are not up to date under ``settings``, by the workspace's own rule."""
    return [
        op for op in ops if not config.up_to_date(op, settings, config.op_library(op, workspace.path), workspace.path)
    ]


# ---------------------------------------------------------------------------------------------
# Reading setup.py's output


def first_compiler_error(log: str, op: str | None = None, root: Path | None = None) -> str:
    """The first compiler error of the log, in ``op``'s sources when given, else its last line.

    Paths under ``root`` (the workspace) are given relative to it: shorter, and the path the user
    opens.
    """
    found = _first_compiler_error(log, op)
    return found.replace(f"{root}{os.sep}", "") if root is not None else found


def _first_compiler_error(log: str, op: str | None) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [
        line
        for line in lines
        if _COMPILER_ERROR.search(line)
        and not line.startswith(("FAILED:", "ninja:", "subprocess."))
        and not is_event_line(line)
    ]
    if op is not None:
        mine = [line for line in errors if f"{op}/csrc/" in line or f"/{op}/" in line]
        errors = mine or errors
    if errors:
        return errors[0]
    return lines[-1] if lines else "no output"


def is_event_line(line: str) -> bool:
    """Whether a line of setup.py's output is one of its JSON progress events."""
    return line.startswith('{"' + opgen_rules().EVENT_KEY + '"')


@dataclass
class LogReader:
    """Turns setup.py's output, line by line, into BuildEvents and each op's compiled files."""

    root: Path | None = None  # the workspace, which error paths are given relative to
    mode: str = ""
    architectures: str | None = None
    current_op: str | None = None
    compiled: dict[str, list[str]] = field(default_factory=dict)
    finished: dict[str, tuple[str, float]] = field(default_factory=dict)
    # ninja's line for a finished file (the file, its event), held until the next line tells
    # whether it failed: a failed compile's status line comes right before its "FAILED:" line.
    held: tuple[str, BuildEvent] | None = None

    def read(self, line: str) -> list[BuildEvent]:
        """The events ``line`` completes (a file's "compiled" event comes with the line after it)."""
        line = line.rstrip("\n")
        if line.startswith("FAILED:"):
            self.held = None  # the file ninja's line before named did not compile
            return []
        events = self.release()
        if is_event_line(line):
            event = self._event(json.loads(line))
            return [*events, event] if event is not None else events
        ninja_status = _NINJA_STATUS.match(line)
        if ninja_status is not None and self.current_op is not None:
            done, total, command = ninja_status.groups()
            source = _COMPILED_SOURCE.search(command)
            name = Path(source.group(1)).name if source else command.split()[0]
            self.held = (name, BuildEvent(op=self.current_op, phase="compiling", detail=f"{name} ({done}/{total})"))
        return events

    def release(self) -> list[BuildEvent]:
        """The held file as compiled, once the output moves on or pauses with no "FAILED:" for it."""
        if self.held is None:
            return []
        (name, event), self.held = self.held, None
        self.compiled.setdefault(event.op, []).append(name)
        return [event]

    def _event(self, event: dict[str, object]) -> BuildEvent | None:
        """One of setup.py's JSON progress events (the form _build_config.py's event_line writes)."""
        phase, op = str(event.get("phase", "")), str(event.get("op", ""))
        if phase == "settings":
            self.mode = str(event.get("describe", ""))
            arch_list = event.get("cuda_arch_list")
            self.architectures = arch_list if isinstance(arch_list, str) else None
            return None
        if phase in ("compiling", "linking"):
            self.current_op = op
            return BuildEvent(op=op, phase=phase)
        seconds = event.get("seconds")
        self.finished[op] = (phase, float(seconds) if isinstance(seconds, (int, float)) else 0.0)
        self.current_op = None
        return BuildEvent(op=op, phase=phase, seconds=self.finished[op][1])

    def outcomes(self, log: str) -> list[OpOutcome]:
        return [
            OpOutcome(
                op=op,
                status=status,
                seconds=seconds,
                first_error=first_compiler_error(log, op, self.root) if status == "failed" else "",
                compiled=tuple(self.compiled.get(op, ())),
            )
            for op, (status, seconds) in self.finished.items()
        ]


# ---------------------------------------------------------------------------------------------
# Progress displays


class PlainProgress:
    """One line per step, for logs: `softmax: compiled softmax_cuda.cu (2/3)`."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write

    def __call__(self, event: BuildEvent) -> None:
        if event.phase in ("queued", "up-to-date"):
            return  # nothing happens to these; the summary lists them
        if event.phase == "compiling":
            self.write(f"{event.op}: compiled {event.detail}" if event.detail else f"{event.op}: compiling")
        elif event.phase == "linking":
            self.write(f"{event.op}: linking")
        else:
            self.write(f"{event.op}: {event.phase} in {event.seconds or 0.0:.1f} s")


@dataclass
class _OpRow:
    phase: str
    detail: str = ""
    started: float | None = None
    seconds: float | None = None
    spinner: Spinner = field(default_factory=lambda: Spinner("dots", style="yellow"))  # one, so it turns


class LiveProgress:
    """A table with one row per op (what it is doing, for how long) that redraws as events come."""

    _STYLES: ClassVar[dict[str, str]] = {"built": "green", "up-to-date": "cyan", "failed": "red", "queued": "dim"}

    def __init__(self) -> None:
        self.rows: dict[str, _OpRow] = {}

    def __call__(self, event: BuildEvent) -> None:
        row = self.rows.setdefault(event.op, _OpRow(phase="queued"))
        if event.phase in ("compiling", "linking") and row.started is None:
            row.started = time.monotonic()
        row.phase, row.seconds = event.phase, event.seconds
        row.detail = event.detail if event.phase == "compiling" else ""

    def __rich__(self) -> RenderableType:
        table = Table.grid(padding=(0, 2))
        for _ in range(4):
            table.add_column()
        for op, row in self.rows.items():
            if row.phase in ("compiling", "linking"):
                icon: RenderableType = row.spinner
                elapsed = f"{time.monotonic() - (row.started or time.monotonic()):.0f} s"
            else:
                icon = Text({"built": "✓", "up-to-date": "=", "failed": "✗"}.get(row.phase, "·"))
                elapsed = f"{row.seconds:.1f} s" if row.seconds is not None and row.phase != "up-to-date" else ""
            phase = Text(row.phase, style=self._STYLES.get(row.phase, "yellow"))
            if row.detail:
                phase.append(f"  {row.detail} done", style="dim")
            table.add_row(icon, Text(op, style="bold"), phase, elapsed)
        return table


@contextmanager
def progress_display(console: Console) -> Iterator[Callable[[BuildEvent], None]]:
    """A live table on a terminal, plain lines elsewhere (CI logs, pipes); yields its callback."""
    if not console.is_terminal:
        yield PlainProgress(lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True))
        return
    live_progress = LiveProgress()
    # transient: the summary that follows replaces the table once the build is done.
    with Live(live_progress, console=console, refresh_per_second=8, transient=True):
        yield live_progress


# ---------------------------------------------------------------------------------------------
# The build

# Translation units of a typical op (binding, CPU kernels, CUDA kernels). With fewer jobs than
# two ops' worth, ops build one at a time as before (ninja spreads each op's units over the jobs).
UNITS_PER_OP = 3


def build_lanes(ops: int, jobs: int) -> int:
    """How many ops to build at once with ``jobs`` compile jobs.

    An op's CUDA unit takes longer than its C++ units together, so jobs given to one op sit idle
    for most of its build: with jobs to spare, as many ops as jobs build at once, one job each
    (the H200 machine, 16 jobs: 50 formula ops in 416 s with 5 ops at a time and 3 jobs each).
    """
    if jobs < 2 * UNITS_PER_OP:
        return 1
    return max(1, min(ops, jobs))


# How long setup.py's output may pause before a held "compiled" event is shown: ninja writes a
# failed file's "FAILED:" line together with the status line before it.
_FAILED_LINE_WAIT_S = 0.2


def _lines_and_pauses(stream: Iterable[str], pause_s: float) -> Iterator[str | None]:
    """The lines of ``stream`` as they come, and None each time ``pause_s`` passes without one."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)  # the end

    threading.Thread(target=pump, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=pause_s)
        except queue.Empty:
            yield None
            continue
        if line is None:
            return
        yield line


@dataclass
class _SetupRun:
    ops: list[str]
    log: str
    returncode: int
    reader: LogReader


def _run_setup(
    ops: list[str],
    env: dict[str, str],
    *,
    workspace: Workspace,
    echo: Callable[[str], None] | None,
    notify: Callable[[BuildEvent], None],
    build_temp: Path | None = None,
) -> _SetupRun:
    """Run the workspace's setup.py for ``ops``, turning its output into events as it comes."""
    command = [sys.executable, "setup.py", "build_ext", "--inplace"]
    if build_temp is not None:
        command += ["--build-temp", str(build_temp)]
    process = subprocess.Popen(
        command,
        cwd=workspace.path,
        env={**env, "OPGEN_OPS": ",".join(ops)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    reader = LogReader(root=workspace.path)
    for line in _lines_and_pauses(process.stdout, _FAILED_LINE_WAIT_S):
        if line is None:
            events = reader.release()
        else:
            lines.append(line)
            events = reader.read(line)
            if echo is not None and not is_event_line(line):
                echo(line.rstrip("\n"))  # the progress display shows those
        for event in events:
            notify(event)
    for event in reader.release():
        notify(event)
    return _SetupRun(ops=ops, log="".join(lines), returncode=process.wait(), reader=reader)


def build_ops(
    workspace: Workspace,
    ops: Iterable[str] = (),
    *,
    cpu_only: bool = False,
    jobs: int | None = None,
    arch: str | None = None,
    echo: Callable[[str], None] | None = None,
    progress: Callable[[BuildEvent], None] | None = None,
) -> BuildReport:
    """Build ``ops`` (all when none are named) in place; BuildFailed if any op fails.

    An op that fails to compile does not stop the others: BuildFailed carries the report with
    every op's outcome and each failure's first compiler error. Ops that are up to date are
    not handed to setup.py at all; when every op is, setup.py does not run.

    ``arch`` is the CUDA architecture list ("9.0", "8.0;9.0"; default TORCH_CUDA_ARCH_LIST,
    else the visible GPU's, else the workspace's default). ``echo`` receives every line of the
    build's output as it comes (for ``-v``); ``progress`` receives each op's BuildEvents.
    """
    names = workspace.require_ops(ops)
    started = time.perf_counter()
    setup = build_setup(workspace, names, cpu_only=cpu_only, jobs=jobs, arch=arch)
    config, env, toolkit, settings = setup.config, setup.env, setup.toolkit, setup.settings
    architectures = settings.cuda_arch_list if settings is not None else None
    notify = progress or (lambda event: None)
    to_build = names if config is None or settings is None else stale_ops(workspace, names, config, settings)
    fresh = [OpOutcome(op=op, status="up-to-date", seconds=0.0) for op in names if op not in to_build]
    for op in names:  # in the order the summary lists them
        notify(
            BuildEvent(op=op, phase="queued") if op in to_build else BuildEvent(op=op, phase="up-to-date", seconds=0.0)
        )
    report = BuildReport(
        ops=names,
        mode=settings.describe() if settings is not None else "unknown",
        toolkit=toolkit,
        seconds=0.0,
        log="",
        outcomes=fresh,
        architectures=architectures,
        jobs=int(env["MAX_JOBS"]),
        ran_setup=bool(to_build),
    )
    if not to_build:
        return replace(report, seconds=time.perf_counter() - started)

    lanes = build_lanes(len(to_build), report.jobs)
    env["PYTHONUNBUFFERED"] = "1"  # phase lines must arrive as they happen, not when the buffer fills
    lock = threading.Lock()

    def locked(callback: Callable[[T], None]) -> Callable[[T], None]:
        def call(value: T) -> None:
            with lock:
                callback(value)

        return call

    run = functools.partial(
        _run_setup, workspace=workspace, echo=None if echo is None else locked(echo), notify=locked(notify)
    )
    if lanes == 1:
        runs = [run(to_build, env)]
    else:
        # One setup.py per op, `lanes` at a time, the compile jobs shared among them: an op has
        # only a few translation units, so one op at a time leaves most cores idle. The build
        # folder is named here too, for a workspace whose setup.py predates op_build_folder (opgen's
        # own rules: an older workspace's copy lacks it).
        lane_env = {**env, "MAX_JOBS": str(max(1, report.jobs // lanes))}
        with concurrent.futures.ThreadPoolExecutor(lanes) as pool:
            runs = list(pool.map(lambda op: run([op], lane_env, build_temp=opgen_rules().op_build_folder(op, workspace.path)), to_build))
    log = "".join(one.log for one in runs)
    returncode = next((one.returncode for one in runs if one.returncode != 0), 0)  # a signal's is negative
    readers = [one.reader for one in runs]
    built = {outcome.op: outcome for one in runs for outcome in one.reader.outcomes(one.log)}
    for one in runs:
        for op in one.ops:
            if op not in built:  # setup.py stopped before it reached this op
                status = "built" if one.returncode == 0 else "failed"
                error = "" if one.returncode == 0 else first_compiler_error(one.log, root=workspace.path)
                built[op] = OpOutcome(op=op, status=status, seconds=0.0, first_error=error)
                notify(BuildEvent(op=op, phase=status, seconds=0.0))
    outcomes = [outcome for outcome in [*fresh, *built.values()] if outcome.op in names]
    outcomes.sort(key=lambda outcome: names.index(outcome.op))
    mode = next((reader.mode for reader in readers if reader.mode), report.mode)
    # where opgen could not resolve the settings itself, setup.py said which
    architectures = architectures or next((r.architectures for r in readers if r.architectures), None)
    report = replace(
        report,
        mode=mode,
        architectures=architectures,
        seconds=time.perf_counter() - started,
        log=log,
        outcomes=outcomes,
    )
    if returncode != 0 or report.failed:
        failed = report.failed
        first_error = failed[0].first_error if failed else first_compiler_error(log, root=workspace.path)
        raise BuildFailed(ops=[o.op for o in failed] or to_build, first_error=first_error, report=report)
    return report
