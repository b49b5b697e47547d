"""One kernel of a schedule run on windows of its outermost loop, its inputs from the reference.

Each kernel is partitioned on its own: what it reads is stored from the reference's values
(an intermediate an earlier kernel wrote equals the reference, which verified parts do), on the
positions its producer stored where it reads the producer's layout (`partition.footing`), so
any window of any kernel runs without the kernels before it and reads what a whole run reads.
A window's outputs are checked against the reference's same rows when the outer loop indexes
the output (`outer_dims`); when it is a reduction, a window writes partial sums: summed over all
windows (sharded) they are checked against the reference, and each window on its own against the
kernel's ops on its inputs cut to the window where the setup carries that check
(`partition.partials`; the sampled mode).

    >>> import fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> p = fuseflow.from_mlir("tests/mlir/spmv.mlir")
    >>> data = fuseflow.random_inputs(p, density=0.3, seed=1)
    >>> values = reference_values(p, data)
    >>> setup = kernel_setup(compile_schedule(p, "full").kernels[0], values)
    >>> run = run_window_of(setup, Window(((0, 16),)), None, "fast")
    >>> window_problem(setup, run, values), run.cycles > 0
    (None, True)
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from ..errors import NotSupported
from ..execute import decode, stored_inputs, storing_bytes
from ..ir.reference import bind_inputs, reference
from ..ir.values import DENSE_LIMIT, is_sparse
from ..memory import Budget
from ..pipeline import compare, engine_function
from ..sam.graph import SamGraph
from ..sim.storage import level_entries
from ..sim.window import Window, outer_dims, outer_extent, run_window
from .footing import written_pattern
from .partials import PartialSums, rows_of
from .timing import TaskTime


@dataclass
class KernelSetup:
    """What running any window of a kernel needs (sent once to every dask worker)."""

    index: int
    graph: SamGraph
    stored: dict  # input name -> StoredTensor, from the reference's values
    dims: dict[str, int]  # output -> the dimension the outer loop indexes (absent: a reduction)
    extent: int  # coordinates of the outer loop
    partials: PartialSums | None = None  # checks each window's partial sums as it runs (then drops them)
    drain_rate: float = 0.0  # cycles a run's drain spends per value written, taken off (`partition.drain`)
    patterns: frozenset = frozenset()  # outputs whose stored positions each run reports (`partition.footing`)
    unwindowed: str = ""  # why a window of its outer loop is not a slice of its work (`unwindowed`), or ""

    def without_inputs(self) -> KernelSetup:
        """This setup without its stored inputs (kept after the kernel's windows have run)."""
        return replace(self, stored={}, partials=None)

    def cycles_of(self, run: WindowRun) -> float:
        """A run's cycles less its drain's (`drain_rate` per value its outputs wrote): what the
        sampled mode sums over windows (a reducing kernel's whole run drains only once)."""
        return run.cycles - self.drain_rate * run.drained

    @property
    def reduces(self) -> bool:
        """Whether some output is a sum over the outer loop (windows write partial sums)."""
        return any(m.role == "output" and n not in self.dims for n, m in self.graph.tensors.items())


@dataclass
class WindowRun:
    """A window's simulation: cycles, token events, counters, and its outputs (full shape)."""

    window: Window
    cycles: int
    tokens: int
    counters: dict[str, int]
    max_occupancy: int
    outputs: dict  # partial sums checked as the window ran (`KernelSetup.partials`) are not kept
    time: TaskTime | None = None  # where and how long it ran (`partition.timing`)
    partials: PartialCheck | None = None  # the check of its partial sums, where the setup asked for it
    drained: int = 0  # values its outputs wrote (a reducing kernel writes all it touched at its end)
    written: dict = field(default_factory=dict)  # output -> positions it stored (`footing.written_pattern`)


@dataclass(frozen=True)
class PartialCheck:
    """A window's partial sums compared with the kernel's ops on its inputs cut to the window."""

    problem: str | None  # None: equal


def reference_values(program, data: dict) -> dict:
    """Every tensor of `program`: the inputs bound, every op's result from the reference."""
    values = bind_inputs(program, data)
    values.update(reference(program, values, keep_intermediates=True))
    return values


def kernel_tensors(kernel) -> set[str]:
    """The program's tensors a kernel reads, writes or estimates its windows from."""
    names = {meta.stores(name) for name, meta in kernel.graph.tensors.items()}
    return names | ({leaf.tensor for leaf in kernel.region.leaves} if kernel.region is not None else set())


def kernel_setup(kernel, values: dict, budget: Budget | None = None, written: dict | None = None,
                 patterns=frozenset()) -> KernelSetup:
    """A kernel's inputs stored as its graph reads them, from `values` (`reference_values`),
    and the intermediates earlier kernels wrote as they wrote them, from `written` ({name:
    (StoredTensor, the writer's GraphTensor)}, `footing.stored_as_written`); what storing them
    allocates asked of `budget` first, when given. Its runs report the stored positions of the
    outputs named in `patterns`."""
    graph, written = kernel.graph, written or {}
    if budget is not None:
        budget.check(storing_bytes(kernel, values, written), f"kernel k{kernel.index}'s inputs, stored for its windows")
    return KernelSetup(kernel.index, graph, stored_inputs(kernel, values, written), outer_dims(graph),
                       outer_extent(graph), patterns=frozenset(patterns), unwindowed=unwindowed(kernel))


REDUCED_INSIDE = "its outer loop is a reduction that later ops of the kernel read (a window would see part of it)"


def unwindowed(kernel) -> str:
    """Why windows of the kernel's outer loop are not slices of its work, or "". A window
    restricts every loop at the top of an op's nest (their scanners start from a root); an op
    that sums (or takes the max) over such a loop while another op of the kernel reads the result
    would see part of the reduction (a softmax's row maximum over the loop, a product's sum fed to
    a max, a recomputed copy's reduction in a loop of its own)."""
    region = kernel.region
    if region is None or not kernel.order:
        return ""
    nests = kernel.table.nesting.nest
    top = {kernel.order[0]} | {nests[inst.id][0] for inst in region.instances if nests.get(inst.id)}
    if any(top & set(inst.reduce_vars) and inst.consumers for inst in region.instances):
        return REDUCED_INSIDE
    return ""


_LOCAL_BUDGET: list[Budget] = []  # the budget of the partitioned run going on in this process


@contextlib.contextmanager
def local_budget(budget: Budget):
    """Window runs made in this process meanwhile are held to `budget` (a suite task's share of
    the machine, not all it has left: another task may be running beside it).

        >>> with local_budget(Budget(10**9)):
        ...     _LOCAL_BUDGET[-1].limit
        1000000000
    """
    _LOCAL_BUDGET.append(budget)
    try:
        yield
    finally:
        _LOCAL_BUDGET.pop()


def run_window_of(setup: KernelSetup, window: Window, hw, engine: str) -> WindowRun:
    """Simulate `setup`'s kernel on `window` (a module-level function: dask pickles it); the
    fast engine's buffers are held to the run's budget (`local_budget`) in the process that
    started the run, to the memory available there on a dask worker."""
    start, wall, cpu = time.time(), time.perf_counter(), time.thread_time()
    budget = _LOCAL_BUDGET[-1] if _LOCAL_BUDGET else Budget()
    run, windowed = run_window(setup.graph, setup.stored, window, hw, engine_function(engine), budget=budget)
    names = [name for name, meta in setup.graph.tensors.items() if meta.role == "output"]
    outputs = {name: _window_output(run.written[name], windowed.written_meta(name)) for name in names}
    drained = sum(len(run.written[name].vals) for name in names)
    checked = PartialCheck(setup.partials.problem(setup.index, outputs, window)) if setup.partials else None
    patterns = {name: written_pattern(run.written[name], setup.graph.tensors[name]) for name in setup.patterns}
    return WindowRun(window, int(run.cycles), int(sum(run.stream_tokens.values())), dict(run.counters),
                     max((run.max_occupancy or {}).values(), default=0), outputs,
                     TaskTime(str(window), f"pid {os.getpid()}", start, time.perf_counter() - wall,
                              time.thread_time() - cpu), checked, drained, patterns)


@dataclass
class WindowEntries:
    """A window's 2-D output over a background other than 0 (a log-softmax's): the entries it
    stored, its rows', with `fill` everywhere else. Decoded densely, each window would cost the
    whole output (GCN on the MAG twin: 736,389 x 349, 2 GB a window)."""

    coords: tuple[np.ndarray, np.ndarray]
    vals: np.ndarray
    shape: tuple[int, int]
    fill: float

    def rows(self, dim: int, rows: np.ndarray) -> np.ndarray:
        """The dense values of `rows` (indices along `dim`), `fill` where nothing was stored.

            >>> e = WindowEntries((np.array([1, 1]), np.array([0, 2])), np.array([5.0, 6.0]), (4, 3), -1.0)
            >>> e.rows(0, np.array([1, 2])).tolist()
            [[5.0, -1.0, 6.0], [-1.0, -1.0, -1.0]]
        """
        shape = list(self.shape)
        shape[dim] = len(rows)
        out = np.full(shape, self.fill)
        where = np.full(self.shape[dim], -1, dtype=np.int64)
        where[rows] = np.arange(len(rows))
        at = where[self.coords[dim]]
        inside = at >= 0
        index = [None, None]
        index[dim], index[1 - dim] = at[inside], self.coords[1 - dim][inside]
        out[tuple(index)] = self.vals[inside]
        return out

    def stored_outside(self, dim: int, mask: np.ndarray) -> bool:
        """Whether an entry lies outside the rows `mask` keeps."""
        return bool((~mask[self.coords[dim]]).any())

    def write_into(self, total: np.ndarray) -> None:
        total[self.coords] = self.vals


def _window_output(written, meta):
    """A window's output: over background 0 its entries (`_compact`), over another background of
    a 2-D tensor with a compressed level its stored entries (`WindowEntries`), else decoded."""
    levels = [written.levels[k] for k in sorted(written.levels)]
    if meta.fill != 0.0 and len(meta.shape) == 2 and len(levels) == 2 and not meta.block and \
            any(getattr(level, "is_compressed", False) for level in levels):
        pos, (c0, c1) = level_entries(levels)
        coords = (c0, c1) if tuple(meta.mode_order) == (0, 1) else (c1, c0)
        return WindowEntries(coords, np.asarray(written.vals, dtype=np.float64)[pos], tuple(meta.shape), meta.fill)
    return _compact(decode(written, meta), meta.fill)


def _compact(value, fill: float):
    """A window's 2-D output over background 0 as its stored entries (COO): a window is a
    sliver of the output, and a sample holds hundreds of them (a CSR or dense copy each costs
    the whole output's rows)."""
    if fill == 0.0 and np.ndim(value) == 2:
        return sp.coo_array(value)
    return value


def row_mask(window: Window, size: int, block: int = 1) -> np.ndarray:
    """The rows of a dimension of `size` a window covers (its ranges count blocks of `block`
    rows where the tensor is stored in tiles)."""
    mask = np.zeros(size, dtype=bool)
    for lo, hi in window.ranges:
        mask[lo * block:min(hi * block, size)] = True
    return mask


def _outer_rows(window: Window, meta, dim: int) -> np.ndarray:
    """`row_mask` of output `meta`'s dimension `dim`, which the outer loop indexes."""
    return row_mask(window, meta.shape[dim], int(meta.block[dim]) if meta.block else 1)


def _masked(value, dim: int, mask: np.ndarray, fill: float):
    """`value` where the outer coordinate is in `mask`, `fill` elsewhere."""
    if is_sparse(value):
        keep = sp.diags_array(mask.astype(np.float64))
        return sp.csr_array(keep @ value if dim == 0 else value @ keep)
    shape = [1] * np.ndim(value)
    shape[dim] = mask.shape[0]
    return np.where(mask.reshape(shape), value, fill)


def window_problem(setup: KernelSetup, run: WindowRun, values: dict, rtol=1e-6, atol=1e-9) -> str | None:
    """None when every output indexed by the outer loop equals the reference on the window's
    rows and its background elsewhere, and its partial sums, where checked as it ran, equal
    theirs; else what differs. (Unchecked partial sums are checked summed.)"""
    if run.partials is not None and run.partials.problem:
        return run.partials.problem
    for name, dim in setup.dims.items():
        meta = setup.graph.tensors[name]
        want, got = values[meta.stores(name)], run.outputs[name]
        mask = _outer_rows(run.window, meta, dim)
        if isinstance(got, WindowEntries) or (is_sparse(got) and meta.fill == 0.0 and np.ndim(got) == 2):
            problem = _rows_problem(name, got, want, dim, mask, rtol, atol)
        else:
            problem = compare(name, got, _masked(want, dim, mask, meta.fill), rtol, atol)[1]
        if problem:
            return f"window {run.window} of kernel {setup.index}: {problem}"
    return None


def _rows_problem(name: str, got, want, dim: int, mask: np.ndarray, rtol, atol) -> str | None:
    """`window_problem` for a window output kept as its entries (sparse over background 0, or
    `WindowEntries`): its rows (columns for `dim` 1) inside the window against the reference's
    same rows, and nothing stored outside; it never builds the whole output's dense shape (a
    window is a sliver of it)."""
    rows = np.flatnonzero(mask)
    if isinstance(got, WindowEntries):
        outside, got_rows = got.stored_outside(dim, mask), got.rows(dim, rows)
    else:
        stray = _masked(got, dim, ~mask, 0.0)
        outside, got_rows = bool(stray.nnz and np.any(stray.data != 0)), rows_of(got, dim, rows)
    if outside:
        return f"simulated {name} stores values outside the window's rows"
    problem = compare(name, got_rows, rows_of(want, dim, rows), rtol, atol)[1]
    return None if problem is None else f"{problem} (of the window's rows, counted from its first)"


def combined_outputs(setup: KernelSetup, runs: list[WindowRun]) -> dict:
    """The kernel's outputs from windows covering its outer loop: rows taken from the window
    that computed them, partial sums added."""
    outputs = {}
    for name, meta in setup.graph.tensors.items():
        if meta.role != "output":
            continue
        fill = meta.fill
        parts = [r.outputs[name] for r in runs]
        if fill == 0.0:  # disjoint rows or partial sums: adding them is both
            total = parts[0]
            for part in parts[1:]:
                total = total + part
            small = is_sparse(total) and int(np.prod(meta.shape, dtype=np.float64)) <= DENSE_LIMIT
            outputs[name] = total.toarray() if small else sp.csr_array(total) if is_sparse(total) else total
        elif len(parts) == 1 and not isinstance(parts[0], WindowEntries):  # one window: the whole output
            outputs[name] = parts[0].toarray() if is_sparse(parts[0]) else parts[0]
        elif name in setup.dims and all(isinstance(p, WindowEntries) for p in parts):
            total = np.full(meta.shape, fill)
            for part in parts:
                part.write_into(total)
            outputs[name] = total
        elif name in setup.dims and not any(is_sparse(p) for p in parts):
            dim, total = setup.dims[name], np.full(meta.shape, fill)
            for r, part in zip(runs, parts):
                total = np.where(_masked(np.ones(meta.shape, bool), dim, _outer_rows(r.window, meta, dim), False),
                                 part, total)
            outputs[name] = total
        else:
            raise NotSupported(f"output {name} of kernel {setup.index} sums partial results over a background "
                               f"of {fill}", "partitioned simulation")
    return outputs
