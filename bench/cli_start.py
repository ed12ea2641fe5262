"""How long `episodes` takes to start: a new process each time, as a shell or a hook runs it.

    python bench/cli_start.py [--runs 20]

Runs ``python -c pass`` (the interpreter alone, the floor), ``python -c "import click"``,
`episodes --help` and a few commands' --help, each ``--runs`` times after one warm-up run, and prints
p50 and p95 of the wall time with the median CPU time (user + system), the steadier figure on a
shared machine. Commands are listed from jobs/cli/commands.py and their modules imported only when a
command runs or shows its own --help; bench/hook_latency.py measures the Claude Code SessionStart hook
the same way, side by side with `episodes --help`.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _common import percentile

ROOT = Path(__file__).resolve().parent.parent
EPISODES = [sys.executable, "-m", "jobs.cli"]
SUBCOMMANDS = ("recall", "ingest", "status", "init", "mcp", "claude-code", "keys", "run")


def timed(cmd: Sequence[str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``cmd``, which must exit 0."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return took, (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    cases: list[tuple[str, list[str]]] = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("python -c 'import click'", [sys.executable, "-c", "import click"]),
        ("episodes --help", [*EPISODES, "--help"]),
        *((f"episodes {name} --help", [*EPISODES, name, "--help"]) for name in SUBCOMMANDS),
    ]
    rows: list[tuple[str, list[tuple[float, float]]]] = []
    for name, cmd in cases:
        timed(cmd)  # compiles and caches the bytecode, as an installed package has it
        rows.append((name, [timed(cmd) for _ in range(args.runs)]))
    print(f"{args.runs} cold runs each; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':<34} {'wall p50 ms':>11} {'wall p95 ms':>11} {'wall min ms':>11} {'cpu p50 ms':>10}")
    for name, runs in rows:
        wall, cpu = [w for w, _ in runs], [c for _, c in runs]
        print(
            f"{name:<34} {percentile(wall, 0.5) * 1000:11.0f} {percentile(wall, 0.95) * 1000:11.0f} "
            f"{min(wall) * 1000:11.0f} {percentile(cpu, 0.5) * 1000:10.0f}"
        )
    if (ROOT / "jobs" / "claude_code" / "hook.py").exists():
        print("The Claude Code SessionStart hook: python bench/hook_latency.py (local and remote mode).")


if __name__ == "__main__":
    main()
