"""The design space of a sweep: programs, data points and schedules.

A *program* is an MLIR file (`fuseflow.from_mlir`) or a built-in model (`model:gcn`, through
`fuseflow.models.registry.build(name, dataset=..)`). A *data point* is the input data: random
inputs at a density (optionally with a block-sparse pattern, `block=B`), or a dataset (a model's
dataset name, or an `.npz` of inputs for an MLIR program). A *schedule* is a granularity (a
preset name, any schedule string, or `random:N` contiguous groupings) with each group's dataflow
order varied one group at a time (`orders="all"`).

    >>> ref = ProgramRef.parse("tests/mlir/spmv.mlir")
    >>> point = DataPoint(density=0.2)
    >>> point.key, ref.key
    ('density=0.2', 'tests/mlir/spmv.mlir')
    >>> loaded = load(ref, point, seed=0)
    >>> sorted(loaded.inputs), loaded.inputs["A"].shape
    (['A', 'x'], (64, 48))
    >>> [s for s, label, compiled in schedules(loaded, ["full layout=induced"], orders="all")]
    ['full layout=induced', 'full layout=induced order.0=i,j']
"""
from __future__ import annotations

import copy
import functools
import itertools
import os
import random
from dataclasses import dataclass, field

import numpy as np

from ..checks import check_schedule
from ..data.inputs import read_inputs
from ..errors import FuseflowError, UserError
from ..frontend import from_mlir
from ..fusion.compile import compile_schedule
from ..fusion.nesting import valid_orders
from ..ir.canonicalize import prepare
from ..ir.generate import random_inputs, random_tensor
from ..ir.program import IndexOp, op_output
from ..ir.reference import bind_inputs
from ..ir.stats import stats_for
from ..ir.values import shape_of
from ..models.resolve import BLOCKED_MODELS, resolve
from ..schedule.schedule import OrderChoice, Schedule

PRESETS = ("unfused", "partial", "full")


@dataclass(frozen=True)
class ProgramRef:
    """What a sweep row's `program` column names: an MLIR path, or `model:NAME`."""

    kind: str  # mlir | model
    name: str
    func: str | None = None
    scale: float = 1.0  # model datasets: scale of synthetic graphs
    shapes: tuple = ()  # MLIR: (name, shape) for inputs with dynamic dimensions

    @staticmethod
    def parse(text: str, func: str | None = None, scale: float = 1.0, shapes: dict | None = None) -> "ProgramRef":
        """The program `text` names, by the rules every command follows (`models.resolve`); a
        sweep takes MLIR files and built-in models."""
        ref = resolve(text, "sweep")
        if ref.kind == "torch":
            raise UserError(f"{ref.name}: a sweep takes .mlir files and built-in models", "sweep",
                            "export the PyTorch class to MLIR, or sweep a built-in model (model:NAME)")
        if ref.kind == "model":
            return ProgramRef("model", ref.name, None, float(scale), ())
        if not os.path.isfile(ref.name):
            raise UserError(f"no such MLIR file {ref.name!r}", "sweep", "give a path to an .mlir file")
        shape_items = tuple(sorted((k, tuple(v)) for k, v in (shapes or {}).items()))
        return ProgramRef("mlir", os.path.normpath(ref.name), func, 1.0, shape_items)

    @property
    def key(self) -> str:
        if self.kind == "model":
            return f"model:{self.name}" + (f"@{self.scale:g}" if self.scale != 1.0 else "")
        return self.name + (f"#{self.func}" if self.func else "")


@dataclass(frozen=True)
class DataPoint:
    dataset: str | None = None
    density: float | None = None
    block: int | None = None  # block-sparse random data: nonzeros come in BxB blocks

    @property
    def key(self) -> str:
        parts = []
        if self.dataset is not None:
            parts.append(f"dataset={self.dataset}")
        if self.density is not None:
            parts.append(f"density={self.density:g}")
        if self.block:
            parts.append(f"block={self.block}")
        return " ".join(parts) or "default"


@dataclass
class Loaded:
    """A program with the inputs of one data point (what is simulated and estimated)."""

    ref: ProgramRef
    point: DataPoint
    seed: int
    program: object
    inputs: dict
    presets: dict = field(default_factory=dict)

    @property
    def shapes(self) -> dict:
        return {n: shape_of(v) for n, v in self.inputs.items()}

    @functools.cached_property
    def stats(self):
        """Statistics of the inputs (`ir.stats.DataStats`), computed once."""
        return stats_for(self.program, bind_inputs(self.program, self.inputs))


@functools.lru_cache(maxsize=8)
def _mlir_program(ref: ProgramRef, source: str | None = None):
    """The program of an MLIR ref: from its file, or from the shipped `source` text where the file
    is missing (a worker on another machine)."""
    if source is not None and not os.path.isfile(ref.name):
        return from_mlir(source, func=ref.func)
    try:
        return from_mlir(ref.name, func=ref.func)
    except OSError as err:
        raise UserError(f"cannot read {ref.name}: {err}", "sweep") from None


def mlir_source(ref: ProgramRef) -> str | None:
    """The text of an MLIR ref's file (shipped with tasks to remote workers)."""
    if ref.kind != "mlir":
        return None
    with open(ref.name) as handle:
        return handle.read()


def _registry():
    try:
        from ..models import registry  # noqa: PLC0415 - models load torch (slow); only sweeps of built-in models need them
    except ImportError as err:
        raise UserError(f"built-in models are not available ({err})", "sweep",
                        "give an .mlir file instead") from None
    return registry


@functools.lru_cache(maxsize=8)
def _model_case(name: str, dataset: str | None, seed: int, scale: float, density: float | None,
                block: int | None = None):
    """`models.registry.build` of the model on one data point (cached: the points of a sweep share it)."""
    options = {"seed": seed, "scale": scale if str(dataset or "").startswith("synthetic:") else 1.0}
    if density is not None:  # else the model's own default
        options["density"] = density
    if block is not None:  # a blocked model: BigBird block and tile size
        options["block"] = block
    return _registry().build(name, dataset, **options)


def _random_data(program, point: DataPoint, seed: int, shapes: dict) -> dict:
    density = 0.1 if point.density is None else point.density
    data = random_inputs(program, density=density, seed=seed, shapes=shapes)
    if point.block:
        rng = np.random.default_rng([seed, point.block])
        for name in sorted(data):
            tensor = program.tensors[name]
            if tensor.format.is_dense or not data[name].ndim:
                continue
            block = tuple([1] * (data[name].ndim - 2) + [point.block] * min(2, data[name].ndim))
            data[name] = random_tensor(data[name].shape, density, block, rng)
    return data


def _npz_data(program, path: str) -> dict:
    return read_inputs(path, program, "sweep dataset")


def load(ref: ProgramRef, point: DataPoint, seed: int = 0, source: str | None = None) -> Loaded:
    """The program and the inputs of one data point (deterministic in ref, point and seed)."""
    if ref.kind == "model":
        blocked = point.block is not None and ref.name in BLOCKED_MODELS
        case = _model_case(ref.name, point.dataset, seed, ref.scale, point.density,
                           point.block if blocked else None)
        program, inputs, presets = case.program, dict(case.inputs), dict(case.presets)
        if point.block and not blocked:
            raise UserError("block applies to random data of MLIR programs and to blocked models "
                            f"({', '.join(BLOCKED_MODELS)})", "sweep",
                            "drop blocks for this model")
        missing = [n for n in program.inputs if n not in inputs and n not in program.constants]
        if missing:
            extra = random_inputs(program, density=point.density or 0.1, seed=seed)
            inputs.update({n: extra[n] for n in missing})
        return Loaded(ref, point, seed, program, inputs, presets)
    program = _mlir_program(ref, source)
    shapes = {n: tuple(s) for n, s in ref.shapes}
    if point.dataset is not None:
        inputs = _npz_data(program, point.dataset)
        rest = [n for n in program.inputs if n not in inputs and n not in program.constants]
        if rest:
            extra = _random_data(program, DataPoint(None, point.density, point.block), seed,
                                 {**shapes, **{n: shape_of(v) for n, v in inputs.items()}})
            inputs.update({n: extra[n] for n in rest})
    else:
        inputs = _random_data(program, point, seed, shapes)
    return Loaded(ref, point, seed, program, inputs, {})


# -- schedules ---------------------------------------------------------------------------------
def _with_layout(schedule: str, layout: str | None) -> str:
    if not layout or "layout=" in schedule:
        return schedule
    return f"{schedule} layout={layout}" if layout != "declared" else schedule


def random_groupings(program, count: int, seed: int = 0) -> list[str]:
    """Up to `count` distinct contiguous groupings of the program's ops (reshapes alone), as
    `fusion=[..][..]` schedules, from few to many groups."""
    canonical = prepare(program)
    ops = canonical.ops
    names = [op_output(op) for op in ops]
    fixed = {k for k, op in enumerate(ops) if not isinstance(op, IndexOp)}  # cut around reshapes
    gaps = [k for k in range(1, len(names)) if k not in fixed and k - 1 not in fixed]
    rng = random.Random(seed)
    seen, out = set(), []
    attempts = 0
    while len(out) < count and attempts < 50 * max(count, 1):
        attempts += 1
        share = rng.random()
        cuts = {k for k in gaps if rng.random() < share}
        cuts |= {k for k in range(1, len(names)) if k in fixed or k - 1 in fixed}
        key = tuple(sorted(cuts))
        if key in seen or len(cuts) in (0, len(names) - 1):
            continue  # full and unfused are presets of their own
        seen.add(key)
        groups, start = [], 0
        for cut in sorted(cuts) + [len(names)]:
            groups.append(names[start:cut])
            start = cut
        out.append("fusion=" + "".join("[" + ",".join(g) + "]" for g in groups))
    return out


def granularities(loaded: Loaded, items, layout: str | None = None, seed: int = 0) -> list[tuple[str, str]]:
    """(label, schedule) pairs: a model's preset names map to its presets; `random:N` gives N
    contiguous groupings; anything else is a schedule string."""
    out = []
    for item in items:
        item = str(item).strip()
        if item.startswith("random:"):
            try:
                n = int(item.split(":", 1)[1])
            except ValueError:
                raise UserError(f"bad granularity {item!r}", "sweep", "write random:N, e.g. random:10") from None
            for k, schedule in enumerate(random_groupings(loaded.program, n, seed)):
                out.append((f"random{k}", _with_layout(schedule, layout)))
        elif item in loaded.presets:
            out.append((item, _with_layout(loaded.presets[item], layout)))
        else:
            Schedule.parse(item)  # a UserError for a malformed schedule
            label = item.split()[0] if item.split() and item.split()[0] in PRESETS else item
            out.append((label, _with_layout(item, layout)))
    return out


def _compile(loaded: Loaded, schedule: str | Schedule):
    """Compiled with default orders weighed by the data point's densities (as the heuristic's
    estimate of the same schedule is)."""
    parsed = check_schedule(loaded.program, schedule, loaded.shapes)  # par factors, blocks
    return compile_schedule(loaded.program, parsed, loaded.shapes, stats=loaded.stats)


def structure_key(compiled) -> tuple:
    """What makes two schedules simulate alike: every kernel's ops, order and input storage."""
    key = []
    for k in compiled.kernels:
        tensors = ()
        if k.graph is not None:
            tensors = tuple(sorted((n, m.levels, m.mode_order)
                                   for n, m in k.graph.tensors.items()))
        key.append((tuple(k.group), tuple(k.order), tensors, tuple(compiled.schedule.pars.get(k.index, ()))))
    return tuple(key)


def order_variants(loaded: Loaded, schedule: str, max_orders: int = 24, seen: set | None = None):
    """The schedule with each group's valid orders (up to `max_orders` per group), one group
    varied at a time; yields (schedule, compiled or the compile error). Variants that compile to
    the same kernels as an earlier one (in `seen`) are left out, and so are those whose order
    leaves a later group without any valid order."""
    seen = set() if seen is None else seen
    try:
        parsed = Schedule.parse(schedule)  # read once; each variant is this record with one order set
        base = _compile(loaded, parsed)
    except FuseflowError as err:
        yield schedule, err
        return
    if structure_key(base) not in seen:
        seen.add(structure_key(base))
        yield schedule, base
    for kernel in base.kernels:
        if kernel.region is None:
            continue
        for order in itertools.islice(valid_orders(kernel.region), max_orders):
            variant = f"{schedule} order.{kernel.index}={','.join(order)}"
            record = copy.deepcopy(parsed)
            record.orders[kernel.index] = OrderChoice(tuple(order))
            try:
                compiled = _compile(loaded, record)
            except UserError as err:
                if "has no valid order" in str(err):
                    continue
                yield variant, err
                continue
            key = structure_key(compiled)
            if key in seen:
                continue
            seen.add(key)
            yield variant, compiled


def schedules(loaded: Loaded, items, orders="default", max_orders: int = 24, layout: str | None = None,
              seed: int = 0, pars: list[str] | None = None):
    """Yields (schedule, label, compiled or error) for every granularity x order variant, each
    distinct compiled structure once.

    `orders`: "default" (the compiler's choice), "all" (valid orders per group, one group varied
    at a time), or a list of order items appended to every granularity (e.g. ["order=i,k,j"]).
    `pars`: parallelizations of group 0 tried with every granularity ("i:4", "i:4,j:2"; "" or
    "1" for none)."""
    seen: set = set()
    for label, granularity in granularities(loaded, items, layout, seed):
        for schedule in [granularity + (f" par={p}" if p not in ("", "1") else "") for p in pars or [""]]:
            if orders == "all":
                for variant, compiled in order_variants(loaded, schedule, max_orders, seen):
                    yield variant, label, compiled
                continue
            extras = [""] if orders in ("default", None, "") else [f" {o}" for o in orders]
            for extra in extras:
                variant = schedule + extra
                try:
                    compiled = _compile(loaded, variant)
                except FuseflowError as err:
                    yield variant, label, err
                    continue
                key = structure_key(compiled)
                if key not in seen:
                    seen.add(key)
                    yield variant, label, compiled
