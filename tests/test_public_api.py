"""The public Python API: names in `fuseflow.__all__`, their docstrings, the version, results as
tables, and `python -m fuseflow`."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fuseflow

ROOT = Path(__file__).resolve().parents[1]
# dataclasses whose modules other engineers own; their docstrings are requested from them
OWNED_ELSEWHERE = {"HwConfig", "SimResult", "Compiled"}


def test_every_public_name_resolves_and_explains_itself():
    for name in fuseflow.__all__:
        value = getattr(fuseflow, name)
        if name in ("__version__", "MODELS") or name in OWNED_ELSEWHERE:
            continue
        doc = (value.__doc__ or "").strip()
        assert doc, name
        assert not doc.startswith(f"{name}("), f"{name} has only the dataclass's generated docstring"
    assert "study" in dir(fuseflow) and callable(fuseflow.study)  # the function, not a module


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'simulated'"):
        fuseflow.simulated  # noqa: B018


@pytest.mark.slow
def test_import_is_quick_and_loads_nothing_heavy():
    code = "import sys, fuseflow; print(sorted(m for m in ('torch', 'numba', 'fuseflow.fusion') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_version_is_the_package_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fuseflow.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", fuseflow.__version__)


@pytest.mark.slow
@pytest.mark.parametrize("argv", [[sys.executable, "-m", "fuseflow", "--version"]])
def test_python_dash_m_and_version_flag(argv):
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == f"fuseflow {fuseflow.__version__}"


@pytest.mark.slow
def test_python_dash_m_reports_errors_like_the_command():
    done = subprocess.run([sys.executable, "-m", "fuseflow", "inspect", "missing.mlir"], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.startswith("fuseflow: error: ") and done.stderr.count("\n") == 1


def test_model_simulate_and_tables():
    case = fuseflow.model("gcn", dataset="karate")
    result = fuseflow.simulate(case.program, case.presets["unfused"], case.inputs)
    frame = fuseflow.to_frame(result)
    assert list(frame["kernel"]) == [k.name for k in result.kernels]
    assert frame["cycles"].sum() == result.cycles and frame["flops"].sum() == result.flops
    header, *lines = fuseflow.to_csv(result).splitlines()
    assert header.startswith("program,schedule,kernel") and len(lines) == len(result.kernels)
    assert json.loads(json.dumps(result.to_json()))["cycles"] == result.cycles


def test_study_result_exports(tmp_path):
    study = fuseflow.study("gcn", dataset="karate", schedules=["unfused", "partial"])
    rows = study.to_json()
    assert [r["schedule"] for r in rows] == ["unfused", "partial"] and rows[0]["speedup"] == 1.0
    assert "fusion study: gcn on karate" in str(study) and "partial" in str(study)
    frame = study.to_frame()
    assert frame.loc[1, "speedup"] == pytest.approx(rows[0]["cycles"] / rows[1]["cycles"])
    study.to_csv(tmp_path / "s.csv")
    assert (tmp_path / "s.csv").read_text().splitlines()[0].startswith("model,dataset,schedule")


def test_compile_weighs_default_orders_by_the_data_given():
    case = fuseflow.model("gcn", dataset="karate")
    with_data = fuseflow.compile(case.program, "unfused", data=case.inputs)
    again = fuseflow.compile(case.program, "unfused", data=case.inputs)
    assert [k.order for k in with_data.kernels] == [k.order for k in again.kernels]
    assert all(k.region.stats is not None for k in with_data.kernels if k.region is not None)
    sizes_only = fuseflow.compile(case.program, "unfused")
    assert all(k.region.stats is None for k in sizes_only.kernels if k.region is not None)


def test_to_frame_without_pandas_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas then fails
    with pytest.raises(fuseflow.UserError, match="pip install pandas"):
        fuseflow.to_frame([{"a": 1}])


def readme_python() -> str:
    text = (ROOT / "README.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_readme_python_example_uses_only_public_names():
    code = readme_python()
    imports = re.findall(r"^\s*(?:from|import) (\S+)", code, re.M)
    assert imports == ["fuseflow"], imports
    used = set(re.findall(r"fuseflow\.(\w+)", code))
    assert used and used <= set(fuseflow.__all__), used - set(fuseflow.__all__)


def test_every_public_function_says_what_each_argument_is():
    """Issue #28: `help(fuseflow.simulate)` and the other public functions name every argument
    (in backquotes) in their docstrings."""
    import inspect
    import re

    import fuseflow

    missing = {}
    for name in fuseflow.__all__:
        f = getattr(fuseflow, name)
        if inspect.isfunction(f):
            doc = inspect.getdoc(f) or ""
            unnamed = [p for p in inspect.signature(f).parameters if not re.search(rf"`{p}\b", doc)]
            if unnamed:
                missing[name] = unnamed
    assert not missing


def test_a_scheduler_is_an_address_or_a_client():
    """`scheduler=` takes an address or a dask client; anything else is one line, not a guess."""
    from fuseflow.errors import UserError

    program = fuseflow.from_mlir("tests/mlir/spmm_ikj.mlir")
    with pytest.raises(UserError, match="neither an address nor a dask client"):
        fuseflow.simulate(program, "full", shards=2, scheduler=42)


def test_both_engines_take_the_same_options():
    """The oracle takes the fast engine's `budget` and `on_events`, so callers need not ask which
    engine they hold; its progress ends at the run's token events."""
    from fuseflow.execute import execute
    from fuseflow.memory import Budget
    from fuseflow.pipeline import prepared
    from fuseflow.sim import oracle

    program = fuseflow.from_mlir("tests/mlir/spmm_ikj.mlir")
    data, compiled = prepared(program, "full", None, 1, 0.3)
    reports = []
    run = execute(compiled, data, run_graph_fn=oracle.run_graph, budget=Budget(), on_events=reports.append)
    assert len(run.kernels) == 1 and reports == sorted(reports)
    assert reports[-1] == run.kernels[0].tokens > 0
