"""The search loop: the heuristic proposes and orders candidates, the simulator decides.

1. The presets are simulated (whole, verified): the result is never worse than the best of them.
2. Base candidates are queued by the candidate generator (`moves.Proposals.plan`: every
   grouping under each layout rule, ordered by composed estimates where there are many, or
   grouping moves from the presets where there are too many to enumerate) and compiled and
   estimated in that order as the search goes.
3. Each step simulates the compiled candidate with the least *surrogate* cost
   (`surrogate.Surrogate`: simulated kernels as simulated, the rest by the calibrated estimate
   scaled by how simulated kernels compared with their estimates so far).
4. When a simulated candidate is among the best few, it is expanded: its neighbours (other
   orders, formats, grouping moves, lanes: `moves.Proposals.neighbours`) are queued first.
5. Until the time budget (or a simulation budget) is spent, or every candidate is simulated;
   the answer is the best *simulated* candidate (by cycles, traffic, or the Pareto front of
   both), re-run from its schedule string at the end as `fuseflow simulate` would run it
   (`result.TuneResult`).

Candidates the heuristic puts above the sampling threshold are evaluated sampled, on rungs of
successive halving, and replace the incumbent only when the interval says they are faster
(`judge`); with a `parallel.Pool`, evaluations run on a dask cluster, one per worker.

Estimating and simulating share the time: between two simulations the search compiles and
estimates for about as long as the last simulation took (more while uncompiled groupings
promise better than the best compiled candidate).

    >>> import fuseflow
    >>> ctx = TuneContext.from_program(fuseflow.from_mlir("tests/mlir/shared_filter.mlir"))
    >>> result = Tuner(ctx, budget=30, max_sims=4, final_check=False).run()
    >>> result.verified, result.evaluated["simulated"] <= 4
    (True, True)
"""
from __future__ import annotations

import math
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass

from ..errors import FuseflowError, UserError
from ..schedule.schedule import Schedule
from .answer import answer
from .context import CompileTimeout, SimRow, TuneContext
from .costs import Calibration, KernelCost, load_calibration
from .judge import Ladder, Sampling, load
from .moves import Proposals
from .result import TuneResult, preset_json
from .space import Candidate, SpaceSpec, candidate_of
from .surrogate import Surrogate

OBJECTIVES = ("cycles", "traffic", "pareto")
TOP_EXPAND = 3  # simulated candidates whose neighbourhoods are opened (the best few)
MIN_SLICE = 0.05  # seconds of estimating between two simulations, at least
KEEP_COMPILED = 256  # compiled candidates kept for their simulation or expansion
GRACE = 2.0  # seconds a compilation may run past the budget before it is dropped
ESTIMATE_SHARE = 2.0  # estimating may run past its slice while it has taken at most this times the simulating


@dataclass
class Entry:
    """A candidate the search has met: compiled and estimated (or why not), maybe simulated."""

    candidate: Candidate | None
    schedule: str
    origin: str  # preset | grouping | order | format | lanes | move
    label: str = ""
    costs: list[KernelCost] | None = None
    skey: tuple | None = None
    error: str | None = None
    sim: SimRow | None = None
    expanded: bool = False
    pre: float | None = None  # the composed estimate it was queued by
    order: int = 0  # its place among the search's simulations (1: the first)
    rung: int | None = None  # sampled: the tightest rung it was evaluated on (`judge`); None: whole
    pending: bool = False  # being evaluated on the cluster (`parallel.Pool`)
    too_large: str | None = None  # why it is not evaluated (`Sampling.too_large`): estimated only

    @property
    def simulated(self) -> bool:
        return self.sim is not None


class Tuner:
    """One search (see the module). `simulate(entry)` may be replaced (the validation bench
    looks simulations up in its exhaustive table)."""

    def __init__(self, ctx: TuneContext, *, objective: str = "cycles", budget: float = 60.0,
                 max_sims: int | None = None, spec: SpaceSpec | None = None, calibration: Calibration | None = None,
                 log=None, simulate=None, progress: bool = False, final_check: bool = True,
                 sampling: Sampling | None = None, pool=None, known_presets: dict | None = None):
        if objective not in OBJECTIVES:
            raise UserError(f"unknown objective {objective!r}", "--objective", f"use one of {', '.join(OBJECTIVES)}")
        if not budget or budget <= 0:
            raise UserError(f"the budget must be a positive number of seconds, not {budget!r}", "--budget")
        if max_sims is not None and max_sims < 1:
            raise UserError(f"the simulation budget must be at least 1, not {max_sims!r}", "--max-sims")
        if len(ctx.graph) < 2:
            raise UserError(f"{ctx.label or ctx.program.name} has one op: there is no grouping to choose", "tune",
                            "tune a model with at least two ops (fuseflow orders lists one op's dataflow orders)")
        self.ctx, self.objective, self.budget, self.max_sims = ctx, objective, float(budget), max_sims
        self.spec = spec or SpaceSpec()
        if self.spec.lanes < 1:
            raise UserError(f"lanes must be at least 1, not {self.spec.lanes}", "--lanes")
        self.cal = calibration if calibration is not None else load_calibration(ctx.hw)
        self.identity = Calibration.identity()
        self.log, self._simulate, self.progress, self.final_check = log, simulate, progress, final_check
        self.pool = pool  # a `parallel.Pool`: evaluations on a dask cluster, one in flight per worker
        self.known_presets = dict(known_presets or {})  # preset name -> SimRow simulated elsewhere (a suite's)
        self.entries: dict[str, Entry] = {}  # by schedule string
        self.by_key: dict[tuple, Entry] = {}  # by compiled structure
        self.queue = Proposals(ctx, self.spec, self.cal)  # candidates not yet compiled
        self.known = Surrogate(self.cal)  # simulated kernels
        self.sampling = sampling if sampling is not None else Sampling()
        self.ladder = Ladder(self.sampling)  # successive halving of the sampled candidates
        self.incumbent: Entry | None = None  # the answer so far (a whole run, or sampled on the last rung)
        self.previous: dict[str, dict] = {}  # the search log's rows, by level ("": whole)
        self.failed_rows: list[SimRow] = []  # tighter samples that failed where a looser one had not
        self.sims = 0  # simulations started by this search (resumed ones included)
        self.done = 0  # evaluations taken in (`_record`)
        self.resumed = 0
        self.rejected = 0
        self.timeouts = 0  # compilations dropped at the end of the budget
        self.turn = 0
        self.compiled: OrderedDict = OrderedDict()  # the last `KEEP_COMPILED` compiled, by schedule
        self.sim_seconds = 0.0  # simulating so far (a simulation read from the log: as long as it took)

    def _compile(self, text: str, limited: bool = True):
        """`ctx.compile`, remembering the last few (a candidate is simulated or expanded soon
        after it is compiled, mostly); `limited`: dropped (`CompileTimeout`) when it would run
        more than `GRACE` seconds past the budget (not the presets)."""
        if text in self.compiled:
            self.compiled.move_to_end(text)
            return self.compiled[text]
        within = max(0.0, self.budget - self._elapsed()) + GRACE if limited else None
        compiled = self.ctx.compile(text, within=within)
        self.compiled[text] = compiled
        if len(self.compiled) > KEEP_COMPILED:
            self.compiled.popitem(last=False)
        return compiled

    # -- bookkeeping ------------------------------------------------------------------------------
    def _elapsed(self) -> float:
        return time.perf_counter() - self.start

    def _out_of_time(self) -> bool:
        return self._elapsed() >= self.budget

    def _out_of_sims(self) -> bool:
        return self.max_sims is not None and self.sims >= self.max_sims

    def _say(self, text: str) -> None:
        if self.progress:
            print(f"tune: {self._elapsed():6.1f} s  {text}", file=sys.stderr, flush=True)

    def add(self, candidate: Candidate | None, origin: str, schedule: str | None = None, label: str = "",
            pre: float | None = None) -> Entry | None:
        """Compile and estimate a candidate (once); the entry, or None when it compiles to the
        same kernels as one met before."""
        text = schedule or candidate.schedule
        if candidate is not None:
            if candidate in self.queue.seen and schedule is None:
                return None
            self.queue.seen.add(candidate)
        if text in self.entries:
            return self.entries[text] if label else None
        entry = Entry(candidate, text, origin, label, pre=pre)
        try:
            compiled = self._compile(text, limited=not label)
            entry.costs = self.ctx.costs(compiled)
            entry.skey = tuple(k.key for k in entry.costs)
            entry.too_large = self.sampling.too_large(compiled, entry.costs, self.ctx.block)
        except CompileTimeout as err:
            entry.error = err.one_line()
            self.timeouts += 1
            self.entries[text] = entry
            return entry
        except FuseflowError as err:
            entry.error = err.one_line()
            self.rejected += 1
            self.entries[text] = entry
            return entry
        except Exception as err:  # noqa: BLE001 - a compiler bug on one candidate must not end the search
            entry.error = f"{type(err).__name__}: {err}"
            self.rejected += 1
            self.entries[text] = entry
            return entry
        if entry.skey in self.by_key and not label:
            return None  # the same kernels as a candidate already met
        self.entries[text] = entry
        self.by_key.setdefault(entry.skey, entry)
        return entry

    def _value(self, row: SimRow) -> tuple:
        """How good a simulated row is for the objective (smaller is better)."""
        if not row.ok:
            return (math.inf, math.inf)
        if self.objective == "traffic":
            return (row.traffic, row.cycles)
        return (row.cycles, row.traffic)

    # -- simulation -------------------------------------------------------------------------------
    def simulate(self, entry: Entry, rung: int | None = None) -> SimRow:
        """Evaluate a candidate here and now (`_level`, `_logged`, `_record`); with a pool,
        `_submit` evaluates it on the cluster instead."""
        self.sims += 1
        rung = self._level(entry, rung)
        row = self._logged(entry, rung)
        if row is None:
            if rung is None and self._simulate is not None:
                row = self._simulate(entry)
            else:
                row = self.ctx.simulate(entry.schedule, self.compiled.get(entry.schedule), sample=self._plan(rung))
            self._log(entry, rung, row)
        return self._record(entry, rung, row)

    def _level(self, entry: Entry, rung: int | None) -> int | None:
        """The rung a candidate is evaluated on (None: whole): sampled on the first rung where
        its heuristic load is above the sampling threshold; on the last, whole where its final
        run would be (`Sampling.final_whole`)."""
        weight = load(entry.costs, self.ctx.block)
        if rung is None and entry.sim is None and self.sampling.sampled(weight):
            rung = 0
        if rung == self.sampling.top and self.sampling.final_whole(weight):
            rung = None  # the last rung of a candidate small enough for a whole final run: whole now
        return rung

    def _plan(self, rung: int | None):
        return None if rung is None else self.sampling.plan(rung)

    def _logged(self, entry: Entry, rung: int | None) -> SimRow | None:
        """The search log's row of this candidate at this level, if a run before this one logged it."""
        level = "" if rung is None else self.sampling.level(rung)
        if level not in self.previous:
            self.previous[level] = self.log.load(level) if self.log is not None else {}
        row = self.previous[level].get(entry.schedule)
        if row is not None:
            self.resumed += 1
        return row

    def _log(self, entry: Entry, rung: int | None, row: SimRow) -> None:
        if self.log is not None:
            est = self.cal.cycles(entry.costs) if entry.costs else None
            words = sum(k.reads + k.writes for k in entry.costs) * 4 if entry.costs else None
            self.log.record(row, entry.label or entry.origin, est, words, len(entry.costs or []),
                            "" if rung is None else self.sampling.level(rung))

    def _record(self, entry: Entry, rung: int | None, row: SimRow) -> SimRow:
        """Take an evaluation in: the candidate's row and rung, the ladder, the surrogate, the incumbent."""
        self.done += 1
        self.sim_seconds += row.seconds
        if row.ok and not row.sampled:
            rung = None  # the partitioned simulator could not cut its kernels: it ran whole
        if rung is not None and (row.sampled or not row.ok):
            self.ladder.evaluations[rung] += 1  # with this rung's plan (a whole fallback is a whole run)
        if row.ok and rung is not None:  # an interval already within a tighter rung's target counts as that rung
            rung = self.sampling.reached(rung, *row.interval(), row.cycles)
        if not row.ok and entry.sim is not None and entry.sim.ok:  # a tighter sample failed: the looser stands
            self.failed_rows.append(row)
            return row
        entry.sim, entry.rung = row, rung
        entry.order = self.done
        if rung is not None and row.ok:
            self.ladder.add(entry, rung)
        self.known.learn(entry.costs, row)
        self._judge(entry)  # (after the presets, `_presets` makes their best the incumbent)
        return row

    def _judge(self, entry: Entry) -> None:
        """Make `entry` the incumbent if it was evaluated whole or on the last rung and is
        surely better than the incumbent."""
        if entry.sim is None or not entry.sim.ok or entry.rung not in (None, self.sampling.top):
            return
        if self.incumbent is None or self._surely_better(entry, self.incumbent):
            self.incumbent = entry

    def _difference(self, a: Entry, b: Entry) -> tuple[float, float]:
        """a's cycles less b's with the 95% half-width: paired by kernel (`Surrogate.difference`),
        else from the two rows' own intervals (unpaired)."""
        paired = self.known.difference(a.costs or [], b.costs or []) if a.costs and b.costs else None
        if paired is not None:
            return paired
        (la, ha), (lb, hb) = (e.sim.interval() for e in (a, b))
        return (la + ha) / 2 - (lb + hb) / 2, (ha - la) / 2 + (hb - lb) / 2

    def _surely_better(self, a: Entry, b: Entry) -> bool:
        """Whether a beats b for the objective: for cycles, when the whole interval of the
        difference is below 0 (between whole runs: fewer cycles, or as many and less traffic);
        for traffic, by the rows' bytes moved (cycles breaking ties)."""
        if self.objective == "traffic":
            return self._value(a.sim) < self._value(b.sim)
        d, half = self._difference(a, b)
        return d + half < 0 or (d == 0 and half == 0 and (a.sim.traffic or 0) < (b.sim.traffic or 0))

    def _hopeful(self, entry: Entry) -> bool:
        """Whether a sampled candidate may yet beat the incumbent (its interval reaches below)."""
        if self.incumbent is None or self.objective == "traffic":
            return True
        d, half = self._difference(entry, self.incumbent)
        return d - half < 0

    def _promotion(self):
        """The next (entry, rung) the ladder promotes to a tighter rung (successive halving;
        when nothing new is left, every hopeful one), or None."""
        exhausted = not self.queue and not self._open()
        return self.ladder.promotion(lambda e: self.known.cost(e.costs), self._hopeful, exhausted)

    def _promote(self) -> bool:
        """Evaluate the next promoted candidate on its tighter rung; False when there is none."""
        promoted = self._promotion()
        if promoted is None:
            return False
        entry, rung = promoted
        row = self.simulate(entry, rung)
        self._say(f"promoted to +-{self.sampling.rungs[rung]:.0%}: {row.cycles:,} cycles "
                  f"[{row.cycles_low or row.cycles:,}, {row.cycles_high or row.cycles:,}]: {entry.schedule}")
        return True

    def _simulated(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.sim is not None and e.sim.ok]

    def _best(self) -> list[Entry]:
        return sorted(self._simulated(), key=lambda e: self._value(e.sim))

    # -- the search -------------------------------------------------------------------------------
    def refuse_if_too_large(self) -> None:
        """Stop with one line when nothing met so far could be evaluated for its size (every
        preset too large: no footing to compare a candidate against)."""
        large = [e for e in self.entries.values() if e.too_large]
        if large and all(e.sim is None for e in self.entries.values()):
            first = large[0]
            raise UserError(f"no candidate could be evaluated, the presets included: {first.label or first.origin} "
                            f"is {first.too_large}", "tune", "tune a smaller configuration, or raise --sample-above")

    def run(self) -> TuneResult:
        self.start = time.perf_counter()
        presets = self._presets()
        self.refuse_if_too_large()
        self.queue.plan([e.candidate for e in self.entries.values() if e.candidate is not None and e.error is None],
                        self.start + 0.35 * self.budget, self._say)
        if self.pool is not None:
            self._run_pool()
            self._finalist()
            return answer(self, presets)
        last = 0.1
        while not self._out_of_time() and not self._out_of_sims():
            self._expand_best()
            if self._promote():
                continue
            self._estimate_for(max(last, MIN_SLICE))
            entry = self._next()
            if entry is None:
                if not self.queue and not self._promote():
                    break  # every candidate met is simulated, and no sampled one is left to promote
                continue
            row = self.simulate(entry)
            last = row.seconds
            best = self._best()
            if best and best[0] is entry:
                self._say(f"best so far {row.cycles:,} cycles ({self.sims} simulated): {entry.schedule}")
        self._finalist()
        return answer(self, presets)

    def _run_pool(self) -> None:
        """The search with evaluations on the cluster: while a worker is free and time is left,
        the next promotion or candidate is submitted; each result is taken in as it comes."""
        last = 0.1
        while True:
            while self.pool.slots and not self._out_of_time() and not self._out_of_sims():
                if not self._start_next(last):
                    break
            if not self.pool.pending:
                if self._out_of_time() or self._out_of_sims() or not (self.queue or self._open()):
                    return
                continue  # everything started was read from the log: start more
            last = self._take().seconds

    def _start_next(self, last: float) -> bool:
        """Start the next evaluation on the cluster (or take it from the log); False when
        there is nothing to start now."""
        self._expand_best()
        promoted = self._promotion()
        if promoted is None:
            self._estimate_for(max(last, MIN_SLICE))
            entry = self._next()
            promoted = (entry, None) if entry is not None else self._promotion()
        if promoted is None:
            return False
        self._dispatch(*promoted)
        return True

    def _dispatch(self, entry: Entry, rung: int | None = None) -> None:
        """Start an evaluation on the cluster, or take it from the search log."""
        self.sims += 1
        rung = self._level(entry, rung)
        row = self._logged(entry, rung)
        if row is not None:
            self._record(entry, rung, row)
        else:
            entry.pending = True
            self.pool.submit(entry, rung, self._plan(rung))

    def _take(self) -> SimRow:
        """Wait for the next evaluation on the cluster to finish and take it in."""
        entry, rung, row = self.pool.next_done()
        entry.pending = False
        self._log(entry, rung, row)
        return self._record(entry, rung, row)

    def _finalist(self) -> None:
        """At the end of the budget, the best sampled candidate by its estimate that may yet
        beat the incumbent and was not evaluated on the last rung is, once (successive halving
        cut short by the budget would otherwise leave its best below the last rung)."""
        waiting = [e for r in self.ladder.rungs[:-1] for e in r
                   if e.rung not in (None, self.sampling.top) and self._hopeful(e)]
        if waiting:
            entry = min(waiting, key=lambda e: self.known.cost(e.costs))
            self.simulate(entry, self.sampling.top)
            self._say(f"finalist on +-{self.sampling.rungs[-1]:.0%}: {entry.sim.cycles:,} cycles: {entry.schedule}")

    def _presets(self) -> list[dict]:
        """Evaluate every preset (sampled ones on the first rung, as any candidate; with a pool,
        all at once on the cluster); the best of them, by its estimate, on the last rung too
        (here): the first incumbent."""
        met, twins = [], []
        for name, text in self.ctx.presets.items():
            try:
                parsed = Schedule.parse(text)
                cand = candidate_of(parsed, self.ctx.canonical, name)
            except FuseflowError:
                cand = None
            entry = self.add(cand, "preset", schedule=text, label=name)
            if entry is None:
                continue
            given = self.known_presets.get(name)
            if entry.error is None and entry.sim is None and given is not None and given.ok:
                entry.sim, entry.rung = given, (self.sampling.top if given.sampled else None)  # as the suite ran it
                self._judge(entry)
            elif entry.error is None and entry.sim is None and entry.too_large is None:
                twin = self.by_key.get(entry.skey)
                if twin is not None and twin is not entry and (twin.sim is not None or twin.pending):
                    twins.append((entry, twin))  # the same kernels as an earlier preset
                elif self.pool is not None:
                    self._dispatch(entry)  # all presets at once on the cluster
                else:
                    self.simulate(entry)
            met.append((name, text, entry))
        while self.pool is not None and self.pool.pending:
            self._take()
        for entry, twin in twins:
            entry.sim, entry.rung = twin.sim, twin.rung
        ok = [e for _, _, e in met if e.sim is not None and e.sim.ok]
        if ok:
            best = min(ok, key=lambda e: self._value(e.sim))
            if best.rung not in (None, self.sampling.top):
                self.simulate(best, self.sampling.top)
            if best.rung in (None, self.sampling.top):
                self.incumbent = best
        return [preset_json(name, text, entry.sim, entry.error or entry.too_large) for name, text, entry in met]

    def _estimate_for(self, seconds: float) -> None:
        """Compile and estimate queued candidates for about `seconds`, and on while the next
        is a neighbour of a good candidate or promises better than the best compiled candidate
        not yet simulated, as long as estimating has taken at most `ESTIMATE_SHARE` times as
        long as simulating."""
        until = time.perf_counter() + seconds
        while self.queue and not self._out_of_time():
            if time.perf_counter() >= until:
                best = self._best_open()
                head = self.queue.head()
                promising = head < 0 or (best is not None and head * self.known.scale() < best[0])
                spent = self.ctx.compile_seconds - self.queue.table_seconds
                if best is not None and (not promising or spent > ESTIMATE_SHARE * self.sim_seconds):
                    break
            popped = self.queue.pop()
            if popped is not None:
                pre, cand, origin = popped
                self.add(cand, origin, pre=pre)

    def _open(self) -> list[Entry]:
        return [e for e in self.entries.values()
                if e.sim is None and e.error is None and e.costs is not None and not e.pending and not e.too_large]

    def _best_open(self, what: str = "cycles"):
        open_ = self._open()
        if not open_:
            return None
        return min(((self.known.cost(e.costs, what), e) for e in open_), key=lambda x: x[0])

    def _next(self) -> Entry | None:
        """The candidate to simulate next: the least surrogate cost for the objective (Pareto:
        cycles and traffic in turn)."""
        self.turn += 1
        what = "words" if self.objective == "traffic" or (self.objective == "pareto" and self.turn % 2 == 0) \
            else "cycles"
        best = self._best_open(what)
        return best[1] if best is not None else None

    def _expand_best(self) -> None:
        """Expand the best simulated candidate of each of the `TOP_EXPAND` best groupings (and
        layouts); when nothing is left to compile or simulate, the best one not expanded yet,
        however far down."""
        best = [e for e in self._best() if e.candidate is not None]
        leaders: dict = {}
        for entry in best:
            leaders.setdefault((entry.candidate.groups, entry.candidate.layout), entry)
        for entry in list(leaders.values())[:TOP_EXPAND]:
            if self._out_of_time():
                return
            if not entry.expanded:
                entry.expanded = True
                self._expand(entry)
        if not self.queue and not self._open():
            for entry in best[TOP_EXPAND:]:
                if not entry.expanded:
                    entry.expanded = True
                    self._expand(entry)
                    if self.queue:
                        break

    def _expand(self, entry: Entry) -> None:
        """Queue the neighbours of a good simulated candidate (`moves.Proposals.neighbours`)."""
        try:
            compiled = self._compile(entry.schedule)
        except (FuseflowError, CompileTimeout):
            return
        self.queue.neighbours(entry.candidate, compiled, self._out_of_time)

    # -- the answer -------------------------------------------------------------------------------
