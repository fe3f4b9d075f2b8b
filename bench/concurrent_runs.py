"""Identical runs started together on one work directory (issue 41): every run must exit 0
or refuse in one line naming the other run, and the work directory must end up as after
one uninterrupted run, file for file.

Each trial starts ``--runs`` copies of ``python -m pipeline run --input CORPUS --out DIR``
on a fresh ``DIR``, each after a delay drawn from ``[0, --max-delay]`` s (seeded), waits
for all of them, classifies each exit (:func:`outcome`) and compares ``DIR`` with a
reference run's (:func:`differences`). It prints one line per trial and a tally.

Usage (the figures of issue 41's closing note)::

    nice -n 10 python bench/concurrent_runs.py --work bench_out/concurrent --runs 2 \\
        --trials 50 --max-delay 1
    nice -n 10 python bench/concurrent_runs.py --work bench_out/concurrent --runs 8 \\
        --trials 20 --max-delay 0

The corpus is the demo's (``--papers``, built once into ``<work>/corpus``); each run has
one worker (``--workers``), so 2 runs use 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.engine import workdir as W  # noqa: E402

# The only bytes two uninterrupted runs of one command write differently (two runs into
# two directories, diffed): the wall time a reduce stage records in its _SUCCESS.json and
# the time a map stage's manifest records per input file ("counts"). Everything else,
# markers, tables, the release, eval/, is byte-identical, so it is compared as bytes.
TIMING_FIELD = "seconds"

# what a refusal names: the other run holding the work directory (locks.run_lock's line)
REFUSAL = re.compile(r"in use by (another run|a run)")


def _without_timings(path: Path) -> bytes:
    """A file's bytes; a _SUCCESS.json or manifest without its wall time."""
    data = path.read_bytes()
    if path.name != W.SUCCESS and path.parent.name != W.MANIFESTS:
        return data
    record = json.loads(data)
    record.pop(TIMING_FIELD, None)
    if isinstance(record.get("counts"), dict):
        record["counts"].pop(TIMING_FIELD, None)
    return json.dumps(record, sort_keys=True).encode()


def snapshot(out: Path) -> dict[str, str]:
    """sha256 of every file under ``out`` by its relative path (timings left out: see
    :data:`TIMING_FIELD`), and every folder as ``"dir"``, so a leftover temp folder shows.

    ``_locks/`` is left out: its files are empty and exist for whichever configs and
    stages ran there, not for what the run wrote.
    """
    found: dict[str, str] = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if rel == W.LOCKS or rel.startswith(W.LOCKS + "/"):
            continue
        if p.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = hashlib.sha256(_without_timings(p)).hexdigest()
    return found


def differences(got: dict[str, str], want: dict[str, str]) -> list[str]:
    """What differs between two snapshots, one line per path, sorted."""
    lines = []
    for rel in sorted(set(got) | set(want)):
        if rel not in want:
            lines.append(f"extra {rel}")
        elif rel not in got:
            lines.append(f"missing {rel}")
        elif got[rel] != want[rel]:
            lines.append(f"differs {rel}")
    return lines


def outcome(returncode: int, stderr: str) -> str:
    """``"ok"`` (exit 0), ``"refused"`` (exit 2, one ERROR line naming the other run, no
    traceback) or ``"crash"`` (anything else)."""
    if returncode == 0:
        return "ok"
    errors = [line for line in stderr.splitlines() if " ERROR " in line]
    if (
        returncode == 2
        and len(errors) == 1
        and "Traceback" not in stderr
        and REFUSAL.search(errors[0])
    ):
        return "refused"
    return "crash"


@dataclass
class Run:
    delay: float
    returncode: int
    stderr: str

    @property
    def outcome(self) -> str:
        return outcome(self.returncode, self.stderr)


def command(corpus: Path, out: Path, workers: int) -> list[str]:
    """The run every trial starts several times."""
    return [
        sys.executable,
        "-m",
        "pipeline",
        "run",
        "--input",
        str(corpus),
        "--out",
        str(out),
        "--workers",
        str(workers),
        "-q",
    ]


def start_runs(cmd: list[str], delays: list[float], env: dict[str, str]) -> list[Run]:
    """Start ``cmd`` once per delay (seconds after the first), wait for every run."""
    procs = []
    t0 = time.monotonic()
    for delay in sorted(delays):
        time.sleep(max(0.0, t0 + delay - time.monotonic()))
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        procs.append((delay, proc))
    runs = []
    for delay, proc in procs:
        _, err = proc.communicate()
        runs.append(Run(delay, proc.returncode, err))
    return runs


def run_env() -> dict[str, str]:
    """The runs' environment: this checkout's package, no Hub, no dense model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    return env


def reference(corpus: Path, out: Path, workers: int, env: dict[str, str]) -> dict[str, str]:
    """One uninterrupted run's snapshot (the run is started once, alone)."""
    shutil.rmtree(out, ignore_errors=True)
    (run,) = start_runs(command(corpus, out, workers), [0.0], env)
    if run.returncode != 0:
        raise SystemExit(f"the reference run failed: {run.stderr.strip()[-2000:]}")
    return snapshot(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / "bench_out" / "concurrent")
    parser.add_argument("--corpus", type=Path, help="default: the demo corpus in WORK/corpus")
    parser.add_argument("--papers", type=int, default=1500, help="demo corpus size")
    parser.add_argument("--runs", type=int, default=2, help="runs started per trial")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--max-delay", type=float, default=1.0, help="seconds")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--workers", type=int, default=1, help="per run")
    args = parser.parse_args(argv)

    env = run_env()
    corpus = args.corpus
    if corpus is None:
        from pipeline.synth.demo_corpus import build_corpus

        corpus = args.work / "corpus"
        build_corpus(corpus, args.papers)
    want = reference(corpus, args.work / "reference", args.workers, env)
    rng = random.Random(args.seed)
    tally: Counter[str] = Counter()
    bad_trials = 0
    cmd_line = " ".join(command(corpus, args.work / "trial", args.workers)[1:])
    print(f"{args.trials} trials of {args.runs} x `python {cmd_line}`", flush=True)
    for trial in range(args.trials):
        out = args.work / "trial"
        shutil.rmtree(out, ignore_errors=True)
        delays = [round(rng.uniform(0, args.max_delay), 3) for _ in range(args.runs)]
        t0 = time.monotonic()
        runs = start_runs(command(corpus, out, args.workers), delays, env)
        seconds = time.monotonic() - t0
        outcomes = Counter(r.outcome for r in runs)
        tally.update(outcomes)
        diff = differences(snapshot(out), want)
        bad_trials += bool(diff) or bool(outcomes["crash"])
        print(
            f"trial {trial + 1:3d}: delays {delays} -> "
            + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            + f"; work dir {'same as the reference' if not diff else 'DIFFERS'}"
            + f" ({seconds:.1f} s)",
            flush=True,
        )
        for r in runs:
            if r.outcome != "ok":
                last = [line for line in r.stderr.splitlines() if line.strip()][-3:]
                print(f"    rc {r.returncode} ({r.outcome}): " + " | ".join(last), flush=True)
        for line in diff[:10]:
            print(f"    {line}", flush=True)
    total = args.trials * args.runs
    print(
        f"tally: {total} runs in {args.trials} trials: {tally['ok']} exited 0, "
        f"{tally['refused']} refused in one line, {tally['crash']} crashed; "
        f"{args.trials - bad_trials} of {args.trials} trials ended with the reference's work "
        "directory and no crash"
    )
    return 0 if bad_trials == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
