"""The README, as a new user meets it: fuseflow built as a wheel and installed into a fresh
virtual environment, then every command of the README and its Python example run from a
directory outside the repository (no ../shared, no source tree on the path).

The environment's dependencies (torch, numba, ...) come from the test's own environment through
a path file, so nothing is downloaded; fuseflow itself, its package data included, comes only
from the wheel.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from fuseflow.progress import NUMBA_NOTICE

pytestmark = pytest.mark.slow  # builds a wheel and a virtual environment, runs every README command

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

# the README's mymodel.py:Net takes A (64x64) and X (64x16)
MYMODEL = (Path(__file__).parent / "torch_models.py").read_text() + textwrap.dedent("""

    class Net(LinearRelu):
        def __init__(self):
            super().__init__(16, 8)
""")


def readme_commands() -> list[str]:
    """The `fuseflow ...` command lines of the README (the first section's after setup, then the
    Use section's), comments stripped, `;`-joined lines split."""
    first = re.search(r"```\n(.*?)```", README, re.S).group(1)
    commands = [part.strip().replace(".venv/bin/fuseflow", "fuseflow", 1) for line in first.splitlines()
                for part in line.split("&&") if part.strip().startswith(".venv/bin/fuseflow")]
    use = README[README.index("## Use"):]
    block = re.search(r"```\n(fuseflow .*?)```", use, re.S).group(1)
    for line in block.splitlines():
        commands += [part.strip() for part in line.partition("  #")[0].split(";") if part.strip()]
    return commands


def test_the_readme_keeps_two_commands_first():
    first = re.search(r"```\n(.*?)```", README, re.S).group(1).strip().splitlines()
    assert len(first) == 2 and all(line.startswith("bash scripts/setup.sh && ") for line in first)
    assert first[1].endswith(".venv/bin/python -m pytest")


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory):
    """(bin directory of a new venv with the fuseflow wheel installed, a working directory)."""
    base = tmp_path_factory.mktemp("fresh")
    source = base / "src-copy"  # build from a copy: no build/ or egg-info in the repository
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheels = base / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(wheels), str(source)], check=True, capture_output=True)
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # dependencies from this environment; an editable fuseflow there is not activated by a plain path
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("fuseflow-*.whl"))
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)
    work = base / "work"
    shutil.copytree(ROOT / "tests" / "mlir", work / "tests" / "mlir")
    (work / "mymodel.py").write_text(MYMODEL)
    return env_dir / "bin", work


def run(env_bin: Path, work: Path, argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FUSEFLOW_DATA")}
    env.update(PATH=f"{env_bin}:{env['PATH']}", HOME=str(work), MPLBACKEND="Agg")
    return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)


def test_fuseflow_comes_from_the_wheel(fresh_env):
    env_bin, work = fresh_env
    done = run(env_bin, work, [str(env_bin / "python"), "-c", "import fuseflow; print(fuseflow.__file__)"])
    assert "site-packages" in done.stdout and str(ROOT) not in done.stdout, done.stdout + done.stderr
    done = run(env_bin, work, ["fuseflow", "--version"])
    assert done.stdout.strip().startswith("fuseflow ")


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command(fresh_env, command):
    env_bin, work = fresh_env
    done = run(env_bin, work, shlex.split(command))
    expected = 2 if "--depth 4" in command else 0  # the README shows a deadlock report there
    assert done.returncode == expected, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr, done.stderr[-2000:]
    if expected == 2:  # one error line (after the report's "wrote r.html" and numba's notice where it compiles)
        errors = [line for line in done.stderr.splitlines() if not line.startswith("wrote ") and line != NUMBA_NOTICE]
        assert len(errors) == 1 and errors[0].startswith("fuseflow: error: deadlock"), done.stderr


def test_readme_python_example(fresh_env):
    env_bin, work = fresh_env
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    done = run(env_bin, work, [str(env_bin / "python"), "-c", code])
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["unfused", "partial", "full"]
    assert all(line.split()[-1] == "True" for line in lines[:3])
    assert "fusion study: gcn on karate" in done.stdout
