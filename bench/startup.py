"""Start-up cost of each `fuseflow` command: wall time, CPU time and peak memory of whole
processes, and which imports each one pulls (`python -X importtime` evidence).

    python bench/startup.py                   # the table (3 timed runs per command after a warm-up run)
    python bench/startup.py --repeat 5 --json # more runs; one JSON line per command

Each command runs as `python -m fuseflow ...` in its own process; os.wait4 gives that process's
CPU time and peak resident set (what `/usr/bin/time -f %M` reports). One untimed run first fills
the page cache (and numba's cache, should it be empty); the table shows the median of the timed
runs (wall and CPU) and the largest peak. A further run under `-X importtime` lists the heaviest
imports the command pulls (cumulative, top-level packages only) and whether any heavy library
(torch, torch-mlir, numba, dask, matplotlib, scipy) is among them. The load average before and
after is printed: the VM is shared, and a busy neighbour stretches wall time, not CPU time.
The peer `simulate` is measured twice: in its own process (`FUSEFLOW_WORKER=0`, the cold path)
and handed to the resident worker (`fuseflow.cmdline.resident`; the warm-up run starts it, and
the timed runs wait until it listens): its CPU time is the client's plus the worker's forks'
(the worker's children's CPU time, /proc/PID/stat, read before and after), its peak the
client's; the memory the worker holds between commands is printed below the table.
Not a test: pytest does not collect this directory.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from fuseflow.cmdline import resident

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join("bench", "spgemm_peer.mlir")
HEAVY = ("torch", "torch_mlir", "numba", "dask", "matplotlib", "scipy")


@dataclass(frozen=True)
class Command:
    """One command line of the table and the wall time it should stay under (None: no target)."""

    label: str
    argv: tuple[str, ...]
    target_s: float | None = None
    worker: bool = False  # handed to the resident worker (else FUSEFLOW_WORKER=0: its own process)


PEER_ARGV = ("simulate", PEER, "--density", "0.05", "--schedule", "full layout=induced order=j,i,k")
COMMANDS = (
    Command("--help", ("--help",), 1.0),
    Command("help study", ("help", "study"), 1.0),
    Command("inspect spmv.mlir", ("inspect", "tests/mlir/spmv.mlir"), 3.0),
    Command("compile matmul_chain.mlir", ("compile", "tests/mlir/matmul_chain.mlir", "--schedule", "full")),
    Command("simulate peer SpGEMM (own process)", PEER_ARGV, 1.0),
    Command("simulate peer SpGEMM (resident worker)", PEER_ARGV, 1.0, worker=True),
)
WORKER_START_S = 120  # the longest wait for the worker the warm-up run starts


@dataclass
class Measured:
    """A command's runs: medians of wall and CPU seconds, largest peak resident set (MB), the
    heaviest top-level imports [(module, seconds)] and the heavy libraries it loaded."""

    label: str
    command: str
    wall_s: float
    cpu_s: float
    peak_mb: float
    target_s: float | None
    imports: list[tuple[str, float]] = field(default_factory=list)
    import_s: float = 0.0
    heavy: dict[str, float] = field(default_factory=dict)


def worker_pid() -> int | None:
    """The pid of the resident worker serving this install, if one listens."""
    path = resident.socket_path()
    if path is None:
        return None
    try:
        with open(path + ".lock") as lock:
            pid = int(lock.read().split()[0])
        return pid if os.path.exists(path) and os.path.exists(f"/proc/{pid}") else None
    except (OSError, ValueError, IndexError):
        return None


def children_cpu(pid: int | None) -> float:
    """CPU seconds of the reaped children of process `pid` (its forks' time), 0 without one."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")  # cutime, cstime


def run_once(argv: tuple[str, ...], python_flags: tuple[str, ...] = (), worker: bool = False) \
        -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak MB, stderr) of one `python -m fuseflow ARGV` process (with `worker`,
    its CPU time includes the resident worker's fork that ran it)."""
    env = {**os.environ, resident.ENV: "1" if worker else "0"}
    pid = worker_pid() if worker else None
    forks = children_cpu(pid)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *python_flags, "-m", "fuseflow", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"fuseflow {' '.join(argv)} exited {proc.returncode}: {stderr.strip()[-400:]}")
    cpu = usage.ru_utime + usage.ru_stime + children_cpu(pid) - forks
    return wall, cpu, usage.ru_maxrss / 1024, stderr


def await_worker() -> int:
    """The resident worker's pid once it listens (the warm-up run started it)."""
    deadline = time.monotonic() + WORKER_START_S
    while (pid := worker_pid()) is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"no resident worker listens {WORKER_START_S} s after a simulate started one")
        time.sleep(0.2)
    return pid


def top_imports(importtime: str, count: int) -> tuple[list[tuple[str, float]], float]:
    """The `count` top-level imports with the largest cumulative time, and the total, from the
    lines `python -X importtime` writes (`import time: self | cumulative | name`, nested names
    indented by two spaces a level).

    >>> text = "import time: 10 | 500 | numpy\\nimport time: 5 | 40 |   numpy.core\\nimport time: 2 | 30 | json"
    >>> top_imports(text, 1)
    ([('numpy', 0.0005)], 0.00053)
    """
    tops = []
    for line in importtime.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and not name.startswith("  ", 1):
            tops.append((name.strip(), int(cumulative) / 1e6))
    tops.sort(key=lambda t: -t[1])
    return tops[:count], round(sum(t for _, t in tops), 6)


def heavy_loaded(importtime: str) -> dict[str, float]:
    """Seconds each heavy library (`HEAVY`) took to import, from an -X importtime log: the
    cumulative times of its modules imported from outside it (the log lists a module after
    the ones it imports, nested ones indented two spaces a level).

    >>> log = ("import time: 1 | 300 |     numba.core\\nimport time: 1 | 50 |     scipy\\n"
    ...        "import time: 1 | 400 |   numba\\nimport time: 1 | 20 |   scipy.sparse\\n"
    ...        "import time: 1 | 900 | fuseflow.x")
    >>> heavy_loaded(log)
    {'numba': 0.0004, 'scipy': 7e-05}
    """
    entries = []
    for line in importtime.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            _, cumulative, name = line.split("|")
            if cumulative.strip().isdigit():
                depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
                entries.append((depth, name.strip(), int(cumulative) / 1e6))
    seconds: dict[str, float] = {}
    outer: list[tuple[int, str]] = []  # enclosing imports of the entry (the log read backwards)
    for depth, name, cumulative in reversed(entries):
        while outer and outer[-1][0] >= depth:
            outer.pop()
        root = name.split(".")[0]
        if root in HEAVY and (not outer or outer[-1][1] != root):
            seconds[root] = round(seconds.get(root, 0.0) + cumulative, 6)
        outer.append((depth, root))
    return {h: seconds[h] for h in HEAVY if h in seconds}


def measure(cmd: Command, repeat: int, top: int) -> Measured:
    run_once(cmd.argv, worker=cmd.worker)  # warm-up: page cache (numba's cache were it empty; the worker)
    if cmd.worker:
        await_worker()
    runs = [run_once(cmd.argv, worker=cmd.worker) for _ in range(repeat)]
    stderr = run_once(cmd.argv, ("-X", "importtime"), cmd.worker)[3]
    imports, total = top_imports(stderr, top)
    line = "fuseflow " + " ".join(f"'{a}'" if " " in a else a for a in cmd.argv)
    line = f"{line}, resident worker" if cmd.worker else \
        f"{resident.ENV}=0 {line}" if resident.wanted(list(cmd.argv), {}) else line
    return Measured(cmd.label, line,
                    statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                    max(r[2] for r in runs), cmd.target_s, imports, total, heavy_loaded(stderr))


def print_table(rows: list[Measured], loads: tuple[tuple[float, ...], tuple[float, ...]]) -> None:
    print(f"load average before {loads[0][0]:.2f} {loads[0][1]:.2f} {loads[0][2]:.2f}, "
          f"after {loads[1][0]:.2f} {loads[1][1]:.2f} {loads[1][2]:.2f} (1, 5, 15 min)")
    print("| command | wall s | CPU s | peak MB | target | imports s | heavy libraries (import s) | "
          "heaviest top-level imports (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        target = "-" if r.target_s is None else \
            f"< {r.target_s:g} s {'met' if r.wall_s < r.target_s else 'MISSED'}"
        heaviest = ", ".join(f"{name} {s:.2f}" for name, s in r.imports)
        print(f"| `{r.command}` | {r.wall_s:.2f} | {r.cpu_s:.2f} | {r.peak_mb:.0f} | {target} | "
              f"{r.import_s:.2f} | {', '.join(f'{h} {t:.2f}' for h, t in r.heavy.items()) or 'none'} | {heaviest} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per command (default 3)")
    parser.add_argument("--top", type=int, default=4, help="heaviest imports listed per command")
    parser.add_argument("--only", action="append", help="commands whose label contains this (repeatable)")
    parser.add_argument("--json", action="store_true", help="one JSON line per command instead of the table")
    args = parser.parse_args(argv)
    commands = [c for c in COMMANDS if not args.only or any(o in c.label for o in args.only)]
    before = os.getloadavg()
    rows = [measure(c, max(1, args.repeat), args.top) for c in commands]
    after = os.getloadavg()
    if args.json:
        for r in rows:
            print(json.dumps({**asdict(r), "load_before": before, "load_after": after}))
    else:
        print_table(rows, (before, after))
    pid = worker_pid()
    if pid is not None:
        with open(f"/proc/{pid}/status") as status:
            rss = next(line.split()[1] for line in status if line.startswith("VmRSS"))
        print(f"the resident worker (pid {pid}) holds {int(rss) / 1024:.0f} MB between commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
