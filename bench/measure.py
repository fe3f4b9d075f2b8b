"""Wall time and peak RSS of one child process (shared by the benchmarks).

The peak is the child's own ``VmHWM``, read from ``/proc/self/status`` as it exits:
``ru_maxrss`` of a child would include the memory of the forked benchmark process
before ``exec``. While the child runs its ``VmRSS`` is polled, so a child over a
memory limit can be stopped before it starves other processes on a shared machine
(its peak is then the largest RSS seen).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_WRAPPER = """
import os, resource, runpy, sys
target = sys.argv[1]
sys.argv = [target, *sys.argv[2:]]
try:
    if target.endswith(".py"):
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
finally:
    use = resource.getrusage(resource.RUSAGE_SELF)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            hwm = line.split()[1]
            open(os.environ["BENCH_HWM_FILE"], "w").write(f"{hwm} {use.ru_utime + use.ru_stime}")
"""


@dataclass(frozen=True)
class Measured:
    """What one child run cost.

    Attributes:
        seconds: wall time.
        peak_rss_mb: the child's VmHWM (or the largest polled VmRSS when it was killed).
        returncode: the child's exit code (negative: killed by that signal).
        killed_over_mb: the RSS limit that made the benchmark kill it, else None.
        cpu_seconds: the child's user + system CPU time over all its threads (None when
            killed): steadier than wall time on a shared machine.
    """

    seconds: float
    peak_rss_mb: float
    returncode: int
    killed_over_mb: float | None = None
    cpu_seconds: float | None = None


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def run_measured(
    target: str,
    args: list[str],
    max_rss_mb: float | None = None,
    quiet: bool = True,
    poll_seconds: float = 0.2,
) -> Measured:
    """Run ``python -m target *args`` (or ``python target.py *args``) in ``ROOT``.

    Args:
        target: a module name (``pipeline``) or a script path ending in ``.py``.
        args: its arguments.
        max_rss_mb: kill the child (SIGKILL, this child only) when its RSS exceeds this.
        quiet: discard the child's stdout (stderr is kept: logs and errors).
        poll_seconds: how often RSS is read.
    """
    hwm = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_hwm_{os.getpid()}_{time.time_ns()}"
    env = {**os.environ, "BENCH_HWM_FILE": str(hwm)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRAPPER, target, *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL if quiet else None,
        env=env,
    )
    seen_kb, killed = 0, None
    while proc.poll() is None:
        seen_kb = max(seen_kb, _rss_kb(proc.pid))
        if max_rss_mb is not None and seen_kb / 1024 > max_rss_mb and killed is None:
            killed = max_rss_mb
            proc.kill()
        time.sleep(poll_seconds)
    wall = time.perf_counter() - t0
    cpu = None
    try:
        fields = hwm.read_text().split()
        peak_kb = max(int(fields[0]), seen_kb)
        cpu = float(fields[1])
        hwm.unlink()
    except (FileNotFoundError, ValueError, IndexError):
        peak_kb = seen_kb
    return Measured(wall, peak_kb / 1024, proc.returncode, killed, cpu)
