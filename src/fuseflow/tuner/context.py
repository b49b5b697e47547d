"""What a tune works on: the program as the user gave it, its complete inputs, its presets, and
the three things done to a candidate: compile (`compile`), estimate (`costs`), simulate
(`simulate`), each exactly as `fuseflow simulate` does it, so that a schedule the tuner reports
reproduces its cycles there.

    >>> ctx = TuneContext.from_program(__import__("fuseflow").from_mlir("tests/mlir/matmul_chain.mlir"))
    >>> ctx.graph.names, sorted(ctx.presets)
    (('T', 'O'), ['full', 'partial', 'unfused'])
    >>> row = ctx.simulate("unfused")
    >>> row.verified, row.cycles == sum(row.kernel_cycles)
    (True, True)
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass, field

from ..checks import check_schedule
from ..errors import FuseflowError, NotSupported
from ..fusion.compile import compile_schedule
from ..ir.canonicalize import prepare
from ..ir.generate import complete_inputs
from ..ir.reference import bind_inputs
from ..ir.stats import stats_for
from ..ir.values import shape_of
from ..schedule.schedule import Schedule
from .costs import KernelCost, kernel_costs
from .space import OpGraph


class CompileTimeout(BaseException):
    """A candidate's compilation ran out of the time the search had left (a BaseException, as
    KeyboardInterrupt is: the compiler's handlers of its own errors must not take it for one)."""

    def one_line(self) -> str:
        return str(self)


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Raise `CompileTimeout` in the block after `seconds` (SIGALRM: the main thread only, else
    no limit). The compiler is plain Python: what it was building is dropped whole."""
    if seconds is None or threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise CompileTimeout(f"tune: compiling took more than the {seconds:.1f} s left")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class SimRow:
    """One simulated schedule: totals, each kernel's cycles and memory words, or the error."""

    schedule: str
    status: str = "ok"  # ok | error
    cycles: int | None = None
    mem_reads: int | None = None
    mem_writes: int | None = None
    flops: int | None = None
    max_occupancy: int | None = None
    verified: bool = False
    seconds: float = 0.0
    kernel_cycles: list = field(default_factory=list)
    kernel_words: list = field(default_factory=list)  # reads + writes per kernel
    error: str | None = None
    resumed: bool = False  # read from the search log, not simulated by this run
    mode: str = "whole"  # "sampled": `cycles` a regression estimate with a 95% interval; "sharded": sampled
    # where no kernel had windows enough to sample (every window simulated; an interval of width 0)
    cycles_low: int | None = None  # sampled: the run's 95% interval
    cycles_high: int | None = None
    kernel_low: list = field(default_factory=list)  # sampled: each kernel's interval (its cycles where whole)
    kernel_high: list = field(default_factory=list)
    sampled_fraction: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.verified and self.cycles is not None

    @property
    def sampled(self) -> bool:
        """Evaluated by the partitioned simulator (sampled or sharded), not whole."""
        return self.mode != "whole"

    def interval(self) -> tuple[int, int]:
        """The 95% interval of cycles (its cycles where it ran whole)."""
        return (self.cycles_low, self.cycles_high) if self.sampled and self.cycles_low is not None else \
            (self.cycles, self.cycles)

    @property
    def traffic(self) -> int | None:
        """Memory traffic in bytes (words read and written, 4 bytes each)."""
        if self.mem_reads is None or self.mem_writes is None:
            return None
        return 4 * (self.mem_reads + self.mem_writes)


@dataclass
class TuneContext:
    """A program with its data, ready to be tuned (see the module)."""

    program: object  # as given: compiled and simulated as `fuseflow simulate` does
    data: dict
    presets: dict
    label: str = ""
    program_key: str = ""
    data_key: str = ""
    seed: int = 0
    density: float = 0.1
    hw: object = None
    engine: str = "fast"
    budget: object = None  # a fuseflow.Budget for each simulation
    canonical: object = None
    graph: OpGraph | None = None
    shapes: dict = field(default_factory=dict)
    stats: object = None
    block: int | None = None  # the presets' tile size (blocked models), kept by every base candidate
    compile_seconds: float = 0.0
    compiles: int = 0

    def __post_init__(self):
        self.shapes = {n: shape_of(v) for n, v in self.data.items()}
        self.canonical = prepare(self.program, self.shapes)
        self.graph = OpGraph.of(self.canonical)
        self.stats = stats_for(self.program, bind_inputs(self.program, self.data))
        blocks = []
        for text in self.presets.values():
            try:
                blocks.append(Schedule.parse(text).block)
            except FuseflowError:
                continue
        blocked = [b for b in blocks if b is not None]
        if blocked:  # a blocked model (its `-unblocked` presets aside): candidates run with its tiles
            self.block = max(set(blocked), key=blocked.count)

    @staticmethod
    def from_program(program, inputs: dict | None = None, *, presets: dict | None = None, seed: int = 0,
                     density: float = 0.1, shapes: dict | None = None, **options) -> "TuneContext":
        """A context for a `Program`: its inputs completed as `fuseflow.simulate` completes them,
        and generic presets (unfused as the reference counts kernels, one kernel per statement,
        full) unless given."""
        data = complete_inputs(program, dict(inputs or {}), density, seed, shapes)
        data = {n: v for n, v in data.items() if n in program.inputs}
        if presets is None:
            from ..models.presets import as_schedule, reference_unfused  # noqa: PLC0415
            from ..schedule.schedule import statement_groups  # noqa: PLC0415

            canonical = prepare(program, {n: shape_of(v) for n, v in data.items()})
            presets = {"unfused": as_schedule(reference_unfused(canonical)),
                       "partial": as_schedule(statement_groups(canonical)), "full": "full layout=induced"}
        options.setdefault("program_key", program.name)
        options.setdefault("data_key", f"density={density:g}")
        return TuneContext(program, data, dict(presets), seed=seed, density=density, **options)

    # -- the three operations ---------------------------------------------------------------------
    def compile(self, schedule, within: float | None = None):
        """The compiled schedule, or raises `FuseflowError`: as `fuseflow simulate` compiles it
        (`compile_schedule` of the program with the data's shapes and statistics), except that
        the program is canonicalised once, here, not for every candidate. `within`: seconds the
        compilation may take (`CompileTimeout` after them; in the main thread only)."""
        start = time.perf_counter()
        try:
            parsed = check_schedule(self.program, schedule, self.shapes)
            with _time_limit(within):
                return compile_schedule(self.canonical, parsed, self.shapes, canonical=True, stats=self.stats)
        finally:
            self.compile_seconds += time.perf_counter() - start
            self.compiles += 1

    def costs(self, compiled) -> list[KernelCost]:
        return kernel_costs(compiled, self.stats)

    def _sampled(self, compiled, sample):
        """The partitioned simulator's sampled run, or None where it cannot cut this schedule's
        kernels into windows (`NotSupported`: the caller runs it whole instead)."""
        from ..partition.run import simulate_partitioned  # noqa: PLC0415

        try:
            return simulate_partitioned(self.program, compiled, self.data, seed=self.seed, density=self.density,
                                        hw=self.hw, engine=self.engine, sample=sample, budget=self.budget)
        except NotSupported:
            return None

    def simulate(self, schedule, compiled=None, *, as_given: bool = False, sample=None) -> SimRow:
        """Simulate a schedule whole and verify its outputs; a failure is the row's error. With
        `as_given`, the schedule string is handed to the pipeline exactly as `fuseflow simulate
        --schedule` hands it (compiled there, from the program as given). With `sample` (a
        `partition.sampled.SamplePlan`), each kernel's cycles are estimated from a sample of its
        windows, as `fuseflow simulate --error E --sample-seed S` estimates them (`mode` "sampled"
        where any kernel was sampled, with each kernel's interval; whole where the partitioned
        simulator cannot cut the schedule's kernels)."""
        from .. import pipeline  # noqa: PLC0415 - the simulator loads numba

        text = schedule if isinstance(schedule, str) else str(schedule)
        start = time.perf_counter()
        try:
            if as_given:
                compiled = check_schedule(self.program, text, self.shapes)
            elif compiled is None:
                compiled = self.compile(text)
            result = self._sampled(compiled, sample) if sample is not None else None
            if result is None:
                result = pipeline.simulate(self.program, compiled, self.data, seed=self.seed, density=self.density,
                                           hw=self.hw, engine=self.engine, check=True, budget=self.budget)
        except FuseflowError as err:
            return SimRow(text, "error", error=err.one_line(), seconds=time.perf_counter() - start)
        row = SimRow(text, "ok", int(result.cycles), int(result.mem_reads), int(result.mem_writes),
                     int(result.flops), int(result.max_occupancy), bool(result.verified),
                     time.perf_counter() - start, [int(k.cycles) for k in result.kernels],
                     [int(k.mem_reads + k.mem_writes) for k in result.kernels])
        if result.mode != "whole":  # sampled; or sharded, where no kernel had windows enough to sample
            row.mode, row.cycles_low, row.cycles_high = result.mode, int(result.cycles_low), int(result.cycles_high)
            row.kernel_low = [int(k.cycles if k.cycles_low is None else k.cycles_low) for k in result.kernels]
            row.kernel_high = [int(k.cycles if k.cycles_high is None else k.cycles_high) for k in result.kernels]
            row.sampled_fraction = result.sampled_fraction
        return row
