"""One fuzz case: import a random program, draw schedules for it, and run each on the fast engine
and on the oracle; every output must equal the program's own numpy evaluation, and the engines
must agree bit for bit (outputs, cycles and counters of every kernel); a schedule of several
kernels run sharded (2 windows a kernel) must do the whole run's work kernel by kernel (tokens,
FLOPs, reads, writes: intermediates read as their producers stored them).

Schedules: `full` (it must compile, or the compiler must prove that no valid order exists),
no schedule at all (the compiler's default, which must compile), then drawn ones: unfused,
partial, full or random contiguous groupings, each with random valid orders (`order.N=#k`),
sometimes `layout=induced`, a compressed format for an intermediate (`format.T=`), a `par` item,
or `block=B` where B divides an extent.

    >>> from fuzz_programs import RandomChooser, random_program
    >>> outcomes = check_program(random_program(RandomChooser(5)), RandomChooser(6))
    >>> [o.schedule for o in outcomes[:2]], [o.verdict for o in outcomes if o.failed]
    (['full', 'default'], [])
"""
from __future__ import annotations

import itertools
import traceback
from dataclasses import dataclass, field

import numpy as np

from fuseflow.errors import FuseflowError
from fuseflow.execute import execute
from fuseflow.frontend import from_mlir
from fuseflow.fusion.compile import compile_schedule
from fuseflow.fusion.nesting import valid_orders
from fuseflow.fusion.search import NoValidOrder
from fuseflow.ir.canonicalize import prepare
from fuseflow.ir.program import op_output
from fuseflow.ir.reference import bind_inputs
from fuseflow.ir.stats import stats_for
from fuseflow.partition.run import simulate_partitioned
from fuseflow.pipeline import work_differences
from fuseflow.sim import fast, oracle

from fuzz_programs import Chooser, RandomProgram
from fuzz_upstream import UpstreamWorker

RTOL, ATOL = 1e-6, 1e-9
MAX_LISTED = 24  # valid orders counted when drawing `order.N=#k`


@dataclass
class Outcome:
    """A schedule's verdict: ok, proven (no valid order, with the compiler's proof), wrong (an
    output differs from numpy), engines (fast and oracle differ), modes (sharded does other work
    than whole), refused (a one-line error) or
    internal (any other exception); `detail` says what (for ok, the schedule compiled), and
    `outputs` are the fast engine's (ok only). The upstream oracle's outcome (schedule
    `upstream`) is ok, unlowered (upstream MLIR cannot lower or run the program; not a failure
    of fuseflow) or differs (an ok schedule's output differs from upstream MLIR's)."""

    schedule: str
    verdict: str
    detail: str = ""
    outputs: dict = field(default_factory=dict, repr=False)

    @property
    def failed(self) -> bool:
        return self.verdict not in ("ok", "proven", "unlowered")


def draw_schedules(c: Chooser, program, count: int = 2, stats=None, shapes=None) -> list[str | None]:
    """`full`, None (the default), then `count` drawn schedules; their orders are drawn from the
    valid ones as compiling with the data's statistics `stats` lists them."""
    names = [op_output(op) for op in prepare(program).ops]
    drawn: list[str | None] = ["full", None]
    for _ in range(count):
        kind = c.choice(("unfused", "partial", "full", "groups", "groups"))
        if kind == "groups":
            cuts = sorted({c.integer(1, len(names) - 1) for _ in range(c.integer(0, 2))}) if len(names) > 1 else []
            bounds = [0, *cuts, len(names)]
            kind = "fusion=" + "".join("[" + ",".join(names[a:b]) + "]" for a, b in zip(bounds, bounds[1:]))
        items = [kind]
        if c.chance(40):
            items.append("layout=induced")
        if c.chance(20) and len(names) > 1:  # storage of a tensor written between kernels
            items.append(f"format.{c.choice(names[:-1])}=compressed,compressed" + c.choice(("", ";order=1,0")))
        extents = {d for t in program.tensors.values() for d in t.shape if d and d > 1}
        blocks = [b for b in (2, 3, 4) if any(d % b == 0 for d in extents)]
        if blocks and c.chance(15):
            items.append(f"block={c.choice(blocks)}")
        drawn.append(" ".join(_with_orders(c, program, items, stats, shapes)))
    return drawn


def _with_orders(c: Chooser, program, items: list[str], stats, shapes) -> list[str]:
    """`items` with drawn valid orders (`order.N=#k`, group by group: an earlier group's order
    may change what later groups list) and sometimes a `par` item."""
    def compiled():
        try:
            return compile_schedule(program, " ".join(items), shapes, stats=stats)
        except FuseflowError:
            return None

    base = compiled()
    if base is None:
        return items
    for index in [k.index for k in base.kernels if k.region is not None]:
        current = compiled()
        if current is None or not c.chance(50):
            continue
        listed = current.kernels[index].listed_region()
        count = sum(1 for _ in itertools.islice(valid_orders(listed), MAX_LISTED))
        if count:
            items = items + [f"order.{index}=#{c.integer(0, count - 1)}"]
    kernels = [k for k in base.kernels if k.order]
    if kernels and c.chance(25):
        kernel = c.choice(kernels)
        var = c.choice(kernel.order)
        most = min(3, kernel.region.extent.get(var, 3)) if kernel.region is not None else 3
        if most >= 2:  # the compiler refuses more lanes than the loop has iterations (blocks, when blocked)
            items = items + [f"par.{kernel.index}={var}:{c.integer(2, most)}"]
    return items


def _run(compiled, data, engine):
    return execute(compiled, data, run_graph_fn=engine)


def check_schedule(program, schedule: str | None, data: dict, want: dict) -> Outcome:
    """Compile with data statistics (as `simulate` does), run both engines, compare. Without a
    schedule, the default must compile (no `proven` verdict)."""
    outcome = _check(program, schedule, data, want)
    if schedule is None:
        outcome.schedule = "default"
        if outcome.verdict == "proven":
            outcome.verdict = "refused"
    return outcome


def _check(program, schedule: str | None, data: dict, want: dict) -> Outcome:
    try:
        compiled = compile_schedule(program, schedule, _shapes(data), stats=_stats(program, data))
    except NoValidOrder as err:
        return Outcome(schedule, "proven", err.one_line())
    except FuseflowError as err:
        return Outcome(schedule, "refused", err.one_line())
    except Exception as err:  # noqa: BLE001 - any other exception is what the fuzzer looks for
        return Outcome(schedule, "internal", _describe(err))
    try:
        got = _run(compiled, data, fast.run_graph)
        ref = _run(compiled, data, oracle.run_graph)
    except FuseflowError as err:
        return Outcome(schedule, "refused", err.one_line())
    except Exception as err:  # noqa: BLE001 - any other exception is what the fuzzer looks for
        return Outcome(schedule, "internal", _describe(err))
    for name, expected in want.items():
        actual = np.asarray(got.outputs[name], dtype=np.float64)
        problem = _difference(actual, expected)
        if problem:
            return Outcome(schedule, "wrong", f"{name} {problem}")
        other = np.asarray(ref.outputs[name], dtype=np.float64)
        if not np.array_equal(actual.view(np.int64), other.view(np.int64)):
            return Outcome(schedule, "engines", f"{name}: fast and oracle outputs differ")
    if [vars(k) for k in got.kernels] != [vars(k) for k in ref.kernels]:
        return Outcome(schedule, "engines", "fast and oracle kernels differ (cycles or counters)")
    problem = _modes_problem(program, compiled, data, got)
    if problem:
        return Outcome(schedule, *problem)
    return Outcome(schedule, "ok", str(compiled.schedule), {n: got.outputs[n] for n in want})


def _modes_problem(program, compiled, data: dict, whole) -> tuple[str, str] | None:
    """(verdict, detail) where a 2-shard run of a schedule of several kernels does other work
    than the whole run `whole` (kernel by kernel: tokens, FLOPs, reads, writes) or fails with
    more than a one-line refusal; else None."""
    if sum(1 for k in compiled.kernels if not k.is_reshape) < 2:
        return None
    try:
        sharded = simulate_partitioned(program, compiled, data, shards=2)
    except FuseflowError as err:
        return ("internal", f"sharded: {err.one_line()}") if err.exit_status != 2 else None
    except Exception as err:  # noqa: BLE001 - any other exception is what the fuzzer looks for
        return "internal", f"sharded: {_describe(err)}"
    differences = work_differences(sharded.kernels, whole.kernels)
    if differences:
        index, what, got, want = differences[0]
        return "modes", f"kernel {index} sharded: {what} {got}, whole {want}"
    return None


def _difference(actual: np.ndarray, expected: np.ndarray) -> str | None:
    """Where `actual` first differs from `expected` (rtol 1e-6, atol 1e-9, NaN equal to NaN), or None.

    >>> _difference(np.array([[1.0, 2.0]]), np.array([[1.0, 2.5]]))
    'at (0, 1): 2.0 vs 2.5'
    """
    if actual.shape != expected.shape:
        return f"at shape: {actual.shape} vs {expected.shape}"
    bad = np.argwhere(~np.isclose(actual, expected, RTOL, ATOL, equal_nan=True))
    if not len(bad):
        return None
    where = tuple(int(x) for x in bad[0])
    return f"at {where}: {actual[where]} vs {expected[where]}"


def _shapes(data: dict) -> dict:
    return {n: np.shape(v) for n, v in data.items()}


def _stats(program, data: dict):
    """The data statistics `simulate` weighs default orders by."""
    return stats_for(program, bind_inputs(program, data))


def _describe(err: Exception) -> str:
    frame = traceback.extract_tb(err.__traceback__)[-1]
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text} [{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}]"


def check_upstream(p: RandomProgram, data: dict, outcomes: list[Outcome], worker: UpstreamWorker) -> Outcome:
    """The upstream oracle's verdict: every ok schedule's outputs against upstream MLIR's (run by
    `worker`, a child process)."""
    run = worker.run(p, data)
    if run.outputs is None:
        return Outcome("upstream", "unlowered", run.reason)
    for o in outcomes:
        for name, got in o.outputs.items():
            problem = _difference(np.asarray(got, dtype=np.float64), run.outputs[name])
            if problem:
                return Outcome("upstream", "differs", f"{o.schedule}: {name} {problem} (fuseflow vs upstream)")
    return Outcome("upstream", "ok", f"{sum(1 for o in outcomes if o.outputs)} schedules agree")


def check_program(p: RandomProgram, c: Chooser, seed: int = 0, count: int = 2,
                  upstream: UpstreamWorker | None = None) -> list[Outcome]:
    """Every drawn schedule's outcome (an import failure is one outcome of schedule `import`),
    and with an `upstream` worker the upstream oracle's last (`check_upstream`)."""
    try:
        program = from_mlir(p.mlir())
    except Exception as err:  # noqa: BLE001 - an import failure is an outcome too
        return [Outcome("import", "internal" if not isinstance(err, FuseflowError) else "refused",
                        _describe(err))]
    data = p.data(seed)
    want = p.evaluate(data)
    try:
        schedules = draw_schedules(c, program, count, _stats(program, data), _shapes(data))
    except Exception as err:  # noqa: BLE001 - canonicalisation may fail like any step
        return [Outcome("prepare", "internal" if not isinstance(err, FuseflowError) else "refused", _describe(err))]
    outcomes = [check_schedule(program, s, data, want) for s in schedules]
    return outcomes + [check_upstream(p, data, outcomes, upstream)] if upstream is not None else outcomes
