"""The house rules that keep the code readable, checked on the source tree: imports point one way
(down the layers of docs/architecture.md) and never in a circle, no function outgrows a screenful,
and ruff finds nothing."""
import ast
import functools
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "fuseflow"

# What each layer (a package or a top-level module of fuseflow) may import besides itself; an
# entry with a dot allows that module only. Lower layers first, as docs/architecture.md draws them.
LAYERS = {
    "errors": set(),
    "scalar_ops": set(),  # the one table of scalar ops and reductions, below ir and sim
    "memory": {"errors"},
    "files": {"errors"},  # files users name: regular files only, atomic writes
    "tables": {"errors"},  # results as rows, DataFrames, CSV (duck-typed)
    "progress": set(),  # progress bars and the numba notice (studies, simulate and the commands show them)
    "ir": {"errors", "memory", "scalar_ops"},  # values check the memory a dense array needs
    "sam": {"errors"},
    "report": {"errors", "sam"},  # pictures and pages of graphs, compiled schedules and results (duck-typed)
    "gpu": {"errors", "memory", "files"},  # sizes of a plan search checked against the memory budget
    "data": {"errors", "memory", "files"},  # files and archives sized against the memory budget
    "cluster": {"errors", "memory"},  # dask clients and local clusters, a task's memory guard on its worker
    "frontend": {"errors", "ir", "scalar_ops"},
    "schedule": {"errors", "ir"},
    "fusion": {"errors", "ir", "sam", "schedule", "report", "scalar_ops"},
    "sim": {"errors", "sam", "ir.formats", "ir.values", "memory", "scalar_ops"},  # runs a SamGraph without the compiler
    "models": {"errors", "ir", "frontend", "data", "schedule"},
    "execute": {"errors", "ir", "sam", "sim", "memory"},
    # one simulation, asked once: the record the simulating rooms read
    "request": {"errors", "ir", "memory", "sim", "fusion"},
    "pipeline": {"errors", "ir", "sam", "sim", "memory", "schedule", "fusion", "execute", "report", "request"},
    "interop": {"errors", "ir", "sam", "sim"},  # Comal and SAM files of a compiled schedule
    "simreport": {"errors", "ir", "sam", "sim", "memory", "schedule", "fusion", "execute", "pipeline", "report",
                  "request"},
    # what users hand fuseflow, checked at the edge, and the request it makes of it
    "checks": {"errors", "ir", "memory", "schedule", "fusion", "data", "request", "sim", "pipeline"},
    # partitioned simulation: kernels on windows of their outer loop, sharded or sampled
    "partition": {"errors", "ir", "sam", "sim", "memory", "schedule", "fusion", "execute", "pipeline", "request"},
    # many simulations and their results: the fusion study, sweeps, suites, their store and charts
    "studies": {"errors", "ir", "sam", "sim", "memory", "schedule", "fusion", "execute", "pipeline", "frontend",
                "data", "models", "checks", "files", "report", "tables", "progress", "partition", "cluster"},
    # the schedule tuner: candidates compiled, estimated and simulated (whole, or sampled by partition);
    # its log is a sweep database
    "tuner": {"errors", "ir", "memory", "schedule", "fusion", "checks", "sim", "pipeline", "studies", "models",
              "frontend", "partition", "cluster"},
    "api": {"errors", "ir", "memory", "checks", "fusion", "pipeline", "studies", "models", "partition", "tuner",
            "request", "cluster"},
    # compiles the fast engine's kernels into numba's cache by simulating models and products
    "warmup": {"errors", "ir", "sam", "sim", "memory", "schedule", "fusion", "execute", "pipeline", "frontend",
               "data", "models", "report"},
    "": {"errors", "ir", "frontend"},  # fuseflow/__init__: the public names
}
LAYERS["cmdline"] = set(LAYERS)  # the commands sit on top of everything (the grammar reads fuseflow.__version__)
LAYERS["cli"] = {"errors", "cmdline"}  # a thin router: the grammar parses, the command's module runs
LAYERS["__main__"] = {"cli"}
LAYERS["worker"] = {"errors", "cli", "cmdline", "sim"}  # the resident worker runs the router's commands

# functions allowed past MAX_LINES: formula sheets (numba kernels are recognised by their decorator)
FORMULA_SHEETS = {
    "fuseflow.gpu.planning.traffic.analyze": "the DSM data-movement formulas, one per memory level and tensor",
}
MAX_LINES = 80
UNMEASURED = ()  # packages whose function lengths and import circles are not checked


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = SRC.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _typing_only(tree: ast.Module) -> set[int]:
    """The ids of the import statements under `if TYPE_CHECKING:` (types for annotations only)."""
    blocks = [n for n in ast.walk(tree)
              if isinstance(n, ast.If) and ast.unparse(n.test).endswith("TYPE_CHECKING")]
    return {id(n) for block in blocks for stmt in block.body for n in ast.walk(stmt)}


def _imports(path: Path, typing: bool = True) -> set[str]:
    """The fuseflow modules a file imports anywhere (in functions too): `from .x import y`
    names `x.y` where y is a module, else `x`. With `typing=False`, leaves out the imports
    under `if TYPE_CHECKING:`, which never run."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    skipped = set() if typing else _typing_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "fuseflow"}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target.split(".")[0] != "fuseflow":
                continue
            subs = [f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")]
            found |= set(subs) if subs and len(subs) == len(node.names) else {target, *subs}
    return found


@functools.cache
def _graph(typing: bool = True) -> nx.DiGraph:
    """Who imports whom; with `typing=False`, only the imports that run."""
    graph = nx.DiGraph()
    for path in SRC.rglob("*.py"):
        graph.add_node(_module_name(path))
        for target in _imports(path, typing):
            graph.add_edge(_module_name(path), target)
    return graph


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _allowed(source: str, target: str) -> bool:
    rest = target.split(".", 1)[1] if "." in target else ""
    allowed = LAYERS[_layer(source)]
    return _layer(source) == _layer(target) or any(rest == a or rest.startswith(a + ".") for a in allowed)


def test_every_module_has_a_layer():
    unknown = sorted({_layer(m) for m in _graph()} - set(LAYERS))
    assert not unknown, f"add these packages or modules to LAYERS (and docs/architecture.md): {unknown}"


def test_imports_only_point_down():
    upward = [f"{a} imports {b}" for a, b in _graph().edges if not _allowed(a, b)]
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


def test_modules_allowed_by_name_bring_nothing_more():
    """An entry with a dot lets a layer use one module of another package (sim reads `ir.formats`);
    that module may import only what the layer may itself,
    so the exception opens no path upward."""
    graph = _graph()
    wider = [f"{layer} may use {entry}, which imports {target}" for layer, allowed in LAYERS.items()
             for entry in allowed if "." in entry for target in graph.successors(f"fuseflow.{entry}")
             if not any(target == f"fuseflow.{a}" or target.startswith(f"fuseflow.{a}.") for a in allowed)]
    assert not wider, "\n".join(wider)


def _exempt(module: str) -> bool:
    return _layer(module) in UNMEASURED


def test_no_import_cycles():
    """Annotations may name types both ways (sam.draw annotates with
    SamGraph): imports under `if TYPE_CHECKING:` make no circle, but count for the layers."""
    circles = nx.strongly_connected_components(_graph(typing=False))
    cycles = [c for c in circles if len(c) > 1 and not all(map(_exempt, c))]
    assert not cycles, f"modules importing each other: {[sorted(c) for c in cycles]}"


def test_checks_catch_what_they_guard_against():
    """The walker sees a lazy import inside a function and resolves relative imports."""
    imports = _imports(SRC / "studies" / "runner.py")
    assert "fuseflow.sim.fast" in imports and "fuseflow.pipeline" in imports
    assert not _allowed("fuseflow.sim.oracle", "fuseflow.fusion.compile")
    assert not _allowed("fuseflow.sim.oracle", "fuseflow.ir.program")
    assert _allowed("fuseflow.sim.oracle", "fuseflow.ir.formats")
    assert _allowed("fuseflow.cmdline.grammar", "fuseflow.cmdline.gpu") and not _allowed("fuseflow.cli", "fuseflow.api")
    draw = SRC / "sam" / "draw.py"
    assert "fuseflow.sam.graph" in _imports(draw) and "fuseflow.sam.graph" not in _imports(draw, typing=False)


def _long_functions(path: Path) -> list[str]:
    module = _module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        lines = node.end_lineno - node.lineno + 1
        decorators = [ast.unparse(d) for d in node.decorator_list]
        if lines < MAX_LINES or any("jit" in d for d in decorators) or f"{module}.{node.name}" in FORMULA_SHEETS:
            continue
        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_functions_fit_on_a_screen():
    paths = [p for p in SRC.rglob("*.py") if not _exempt(_module_name(p))]
    long = [f for p in paths for f in _long_functions(p)]
    assert not long, f"functions of {MAX_LINES} lines or more (split them into named steps):\n" + "\n".join(long)


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True,
                            text=True, cwd=ROOT)
    if "No module named ruff" in result.stderr:
        pytest.fail("ruff is missing: install the test extra (pip install -e '.[test]')")
    assert result.returncode == 0, result.stdout + result.stderr
