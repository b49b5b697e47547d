"""A suite's progress display on a real (pseudo-)terminal, rendered by a terminal emulator (pyte)
as a user would see it: the suite's bar with tasks done, running and the ETA, a bar per running
task that ticks through silent phases, and a clean screen at the end."""
from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time
from pathlib import Path

import pyte
import pytest

ROOT = Path(__file__).resolve().parents[1]
COLUMNS, LINES = 110, 16
SUITE = """
[suite]
name = "tty"
schedules = ["unfused", "partial", "full"]
[[case]]
model = "gcn"
datasets = ["karate"]
"""
# each task first spends a silent second and a half (as a large case does building and compiling)
CHILD = """
import sys, time
import fuseflow.studies.suite.run as run
study = run.study_schedule
def slow(*args, **kwargs):
    time.sleep(1.5)
    return study(*args, **kwargs)
run.study_schedule = slow
from fuseflow.cli import main
sys.exit(main(["study", "suite", sys.argv[1], "--db", sys.argv[2], "--executor", "serial"]))
"""


def _screens(argv: list[str], timeout: float = 300.0) -> tuple[int, list[list[str]]]:
    """Run argv on a pseudo-terminal of COLUMNS x LINES; its exit code and every distinct screen."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, with this repository's sources first
        os.environ["PYTHONPATH"] = str(ROOT / "src")
        os.execv(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    screen = pyte.Screen(COLUMNS, LINES)
    stream = pyte.ByteStream(screen)
    screens, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 1.0)[0]:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        stream.feed(data)
        shown = [line.rstrip() for line in screen.display]
        if not screens or shown != screens[-1]:
            screens.append(shown)
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), screens


@pytest.mark.slow
def test_suite_bars_on_a_terminal(tmp_path):
    toml = tmp_path / "tty.toml"
    toml.write_text(SUITE)
    code, screens = _screens([sys.executable, "-c", CHILD, str(toml), str(tmp_path / "tty.db")])
    assert code == 0, "\n".join(screens[-1] if screens else [])
    labels = [f"gcn karate {s}" for s in ("unfused", "partial", "full")]

    def task_line(screen, label):
        return next((line for line in screen if line.startswith(f"  {label}:")), None)

    def suite_line(screen):
        return next((line for line in screen if line.startswith("suite tty: ") and "|" in line), None)

    # while a task is silent its bar still shows the time going by, and what it is doing
    silent = [task_line(s, labels[0]) for s in screens]
    assert "  gcn karate unfused: [00:01, building and estimating]" in silent
    # the task bar sits right below the suite's, which counts it as running
    for screen in screens:
        if (line := task_line(screen, labels[0])) and "[00:01" in line:
            assert screen[screen.index(line) - 1] == suite_line(screen) and "1 running" in suite_line(screen)
    # simulating: token events of the estimate, with a percentage
    assert any((line := task_line(s, label)) and "token events" in line and "%|" in line
               for s in screens for label in labels)
    # the end: one line per task in order, the suite's bar full, no task bar left behind
    final = [line for line in screens[-1] if line]
    done = [line for line in final if line.startswith("[")]
    assert [line.split(":")[0] for line in done] == [f"[{k}/3] {label}" for k, label in enumerate(labels, 1)]
    assert all(": ok, " in line and "cycles" in line for line in done)
    bar = suite_line(screens[-1])
    assert "100%" in bar and "3/3" in bar and "0 running" in bar
    assert not any(task_line(screens[-1], label) for label in labels)
    assert any(line.startswith("suite tty: 3 simulated, 0 estimated, 0 failed") for line in final)
