"""The search: the heuristic proposes and orders candidates, the simulator decides.

1. The presets are simulated (whole, verified): the result is never worse than the best of them.
2. Base candidates: every grouping of the ops (`space.groupings`) under each layout rule, with
   default orders and formats. Where there are few, all are compiled and estimated at once;
   where there are more, they are ordered first by a cheap composed estimate (each distinct
   group compiled once beside unfused neighbours, `_GroupTable`) and compiled in that order as
   the search goes; where there are too many to enumerate, the search walks from the presets
   by grouping moves (two groups merged, one split).
3. Each step simulates the compiled candidate with the least *surrogate* cost: the sum over its
   kernels of the simulated cycles of that very kernel where an earlier simulation ran it (same
   ops, order, storage of every tensor it touches, lanes), else the calibrated estimate
   (`costs.Calibration`) scaled by how simulated kernels compared with their estimates so far.
4. When a simulated candidate is among the best few, it is expanded: each group's other valid
   orders (the cheapest by the compiler's loop-work measure), each tensor written between
   kernels in the other level formats, grouping moves, and lanes where `--lanes` allows.
5. Until the time budget (or a simulation budget) is spent, or every candidate is simulated;
   the answer is the best *simulated* candidate (by cycles, traffic, or the Pareto front of
   both), re-run from its schedule string at the end as `fuseflow simulate` would run it.

Estimating and simulating share the time: between two simulations the search compiles and
estimates for about as long as the last simulation took (more while uncompiled groupings
promise better than the best compiled candidate).
"""
from __future__ import annotations

import heapq
import itertools
import math
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..errors import FuseflowError, UserError
from ..schedule.schedule import Schedule
from .context import CompileTimeout, SimRow, TuneContext
from .costs import Calibration, KernelCost, kendall_tau, load_calibration
from .space import (
    Candidate,
    SpaceSpec,
    candidate_of,
    count_groupings,
    grouping_moves,
    groupings,
    level_formats,
    ordered_groups,
    other_orders,
    written_between,
)

OBJECTIVES = ("cycles", "traffic", "pareto")
DIRECT_LIMIT = 300  # base candidates compiled up front when there are at most this many
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

    @property
    def simulated(self) -> bool:
        return self.sim is not None


@dataclass
class TuneResult:
    """What `fuseflow tune` found (see `to_json` for the fields)."""

    program: str
    schedule: str
    cycles: int
    verified: bool
    traffic: int
    max_fifo: int
    objective: str
    lanes: int
    presets: list
    evaluated: dict
    seconds: float
    kernels: list = field(default_factory=list)
    pareto: list = field(default_factory=list)
    tau: dict = field(default_factory=dict)
    best_one_lane: dict | None = None
    reproduced: bool = True
    mode: str = "whole"
    db: str | None = None
    calibration: str = ""

    @property
    def best_preset(self) -> dict | None:
        ok = [p for p in self.presets if p.get("cycles") is not None]
        return min(ok, key=lambda p: p["cycles"]) if ok else None

    @property
    def speedup(self) -> float | None:
        best = self.best_preset
        return best["cycles"] / self.cycles if best and self.cycles else None

    def to_json(self) -> dict:
        best = self.best_preset
        return {"program": self.program, "schedule": self.schedule, "cycles": self.cycles, "mode": self.mode,
                "cycles_low": None, "cycles_high": None, "verified": self.verified, "reproduced": self.reproduced,
                "traffic_bytes": self.traffic, "max_fifo": self.max_fifo, "objective": self.objective,
                "lanes": self.lanes, "presets": self.presets,
                "best_preset": best["name"] if best else None,
                "speedup_over_best_preset": round(self.speedup, 4) if self.speedup else None,
                "best_at_one_lane": self.best_one_lane, "kernels": self.kernels, "pareto": self.pareto,
                "evaluated": self.evaluated, "kendall_tau": self.tau, "calibration": self.calibration,
                "seconds": round(self.seconds, 2), "db": self.db}

    def __str__(self) -> str:
        lines = [f"tuned {self.program} ({self.objective}, lanes {self.lanes}): {self.cycles:,} cycles, "
                 f"{self.traffic:,} bytes moved, " + ("verified" if self.verified else "NOT verified"),
                 f"  schedule: {self.schedule}"]
        if self.speedup:
            lines.append(f"  {self.speedup:.3f}x the best preset ({self.best_preset['name']})")
        lines.append(f"{'preset':<18} {'cycles':>12} {'tuned speedup':>14}")
        for p in self.presets:
            cyc = f"{p['cycles']:,}" if p.get("cycles") is not None else "failed"
            sp = f"{p['cycles'] / self.cycles:.3f}x" if p.get("cycles") and self.cycles else ""
            lines.append(f"{p['name']:<18} {cyc:>12} {sp:>14}")
        e = self.evaluated
        lines.append(f"evaluated: {e['simulated']} simulated ({e['resumed']} of them read from the log), "
                     f"{e['estimated']} estimated only, {e['rejected']} rejected by the compiler; "
                     f"groupings: {e['space']['groupings']} ({e['space']['mode']})")
        if self.tau:
            lines.append(f"heuristic rank quality over {self.tau['n']} simulated candidates: Kendall tau "
                         f"{_fmt(self.tau['calibrated'])} calibrated, {_fmt(self.tau['uncalibrated'])} uncalibrated")
        if self.best_one_lane:
            lines.append(f"at one lane: {self.best_one_lane['cycles']:,} cycles ({self.best_one_lane['schedule']})")
        if len(self.pareto) > 1:
            lines.append("Pareto front (cycles, bytes moved, largest FIFO):")
            lines += [f"  {p['cycles']:>12,} {p['traffic_bytes']:>12,} {p['max_fifo']:>8,}  {p['schedule']}"
                      for p in self.pareto]
        lines.append(f"{self.seconds:.1f} s" + (f"; search log {self.db}" if self.db else ""))
        return "\n".join(lines)


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


class _GroupTable:
    """Composed estimates of groupings: each distinct group compiled once per layout beside
    unfused neighbours (its kernel's calibrated estimate), a grouping's estimate the sum over its
    groups. A group that does not compile there counts as infinitely costly (queued last)."""

    def __init__(self, tuner: "Tuner", all_groupings: list, layouts, deadline: float):
        self.tuner, self.costs = tuner, {}
        ctx = tuner.ctx
        singles = [[n] for n in ctx.graph.names]
        groups = sorted({tuple(g) for gs in all_groupings for g in gs if len(g) > 1}, key=len)
        for layout in layouts:
            self._context(singles, layout, None)
            for g in groups:
                if time.perf_counter() > deadline:
                    return
                self._context([list(g)] + [s for s in singles if s[0] not in g], layout, g)

    def _context(self, groups, layout: str, wanted) -> None:
        ctx = self.tuner.ctx
        cand = Candidate(ordered_groups(ctx.canonical, groups), layout, block=ctx.block)
        try:
            compiled = ctx.compile(cand.schedule)
        except FuseflowError:
            if wanted is not None:
                self.costs[(wanted, layout)] = math.inf
            return
        for kernel, cost in zip(compiled.kernels, ctx.costs(compiled)):
            g = tuple(kernel.group)
            if wanted is None or g == tuple(wanted):
                self.costs[(g, layout)] = self.tuner.cal.kernel_cycles(cost)

    def estimate(self, groups, layout: str) -> float:
        total = 0.0
        for g in groups:
            g = tuple(g)
            if (g, layout) in self.costs:
                total += self.costs[(g, layout)]
            else:  # not reached in time: its ops as singletons
                total += sum(self.costs.get(((n,), layout), 0.0) for n in g)
        return total


class Tuner:
    """One search (see the module). `simulate(entry)` may be replaced (the validation bench
    looks simulations up in its exhaustive table)."""

    def __init__(self, ctx: TuneContext, *, objective: str = "cycles", budget: float = 60.0,
                 max_sims: int | None = None, spec: SpaceSpec | None = None, calibration: Calibration | None = None,
                 log=None, simulate=None, progress: bool = False, final_check: bool = True):
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
        self.entries: dict[str, Entry] = {}  # by schedule string
        self.by_key: dict[tuple, Entry] = {}  # by compiled structure
        self.seen: set = set()  # candidates met (compiled or not)
        self.kernel_sim: dict[tuple, tuple[int, int]] = {}  # kernel key -> simulated (cycles, words)
        self.ratios: list[float] = []  # simulated / calibrated estimate of simulated kernels
        self.word_ratios: list[float] = []
        self.previous = log.load() if log is not None else {}
        self.sims = 0  # simulations started by this search (resumed ones included)
        self.resumed = 0
        self.rejected = 0
        self.timeouts = 0  # compilations dropped at the end of the budget
        self.base: list = []  # heap of (composed estimate, n, candidate)
        self.counter = itertools.count()
        self.turn = 0
        self.space = {}
        self.compiled: OrderedDict = OrderedDict()  # the last `KEEP_COMPILED` compiled, by schedule
        self.sim_seconds = 0.0  # simulating so far (a simulation read from the log: as long as it took)
        self.table_seconds = 0.0  # compiling the composed estimates' groups

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
            if candidate in self.seen and schedule is None:
                return None
            self.seen.add(candidate)
        if text in self.entries:
            return self.entries[text] if label else None
        entry = Entry(candidate, text, origin, label, pre=pre)
        try:
            compiled = self._compile(text, limited=not label)
            entry.costs = self.ctx.costs(compiled)
            entry.skey = tuple(k.key for k in entry.costs)
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

    # -- surrogate --------------------------------------------------------------------------------
    def scale(self, what: str = "cycles") -> float:
        """The median ratio of simulated to estimated kernels so far (1 before any)."""
        ratios = self.ratios if what == "cycles" else self.word_ratios
        return float(sorted(ratios)[len(ratios) // 2]) if ratios else 1.0

    def surrogate(self, entry: Entry, what: str = "cycles") -> float:
        """The candidate's cost as far as the search knows it (see the module, step 3)."""
        scale = self.scale(what)
        total = 0.0
        for k in entry.costs:
            known = self.kernel_sim.get(k.key)
            if known is not None:
                total += known[0] if what == "cycles" else known[1]
            elif what == "cycles":
                total += scale * self.cal.kernel_cycles(k)
            else:
                total += scale * (k.reads + k.writes)
        return total

    def _learn(self, entry: Entry, row: SimRow) -> None:
        if not row.ok or entry.costs is None or len(row.kernel_cycles) != len(entry.costs):
            return
        words = row.kernel_words if len(row.kernel_words) == len(entry.costs) else [0] * len(entry.costs)
        for k, cycles, w in zip(entry.costs, row.kernel_cycles, words):
            if k.reshape or k.key in self.kernel_sim:
                continue
            self.kernel_sim[k.key] = (cycles, w)
            est = self.cal.kernel_cycles(k)
            if est > 0 and cycles > 0:
                self.ratios.append(cycles / est)
            if k.reads + k.writes > 0 and w > 0:
                self.word_ratios.append(w / (k.reads + k.writes))

    def _value(self, row: SimRow) -> tuple:
        """How good a simulated row is for the objective (smaller is better)."""
        if not row.ok:
            return (math.inf, math.inf)
        if self.objective == "traffic":
            return (row.traffic, row.cycles)
        return (row.cycles, row.traffic)

    # -- simulation -------------------------------------------------------------------------------
    def simulate(self, entry: Entry) -> SimRow:
        self.sims += 1
        if entry.schedule in self.previous:
            row = self.previous[entry.schedule]
            self.resumed += 1
        else:
            row = self._simulate(entry) if self._simulate is not None else \
                self.ctx.simulate(entry.schedule, self.compiled.get(entry.schedule))
            if self.log is not None:
                est = self.cal.cycles(entry.costs) if entry.costs else None
                words = sum(k.reads + k.writes for k in entry.costs) * 4 if entry.costs else None
                self.log.record(row, entry.label or entry.origin, est, words, len(entry.costs or []))
        entry.sim = row
        entry.order = self.sims
        self.sim_seconds += row.seconds
        self._learn(entry, row)
        return row

    def _simulated(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.sim is not None and e.sim.ok]

    def _best(self) -> list[Entry]:
        return sorted(self._simulated(), key=lambda e: self._value(e.sim))

    # -- the search -------------------------------------------------------------------------------
    def run(self) -> TuneResult:
        self.start = time.perf_counter()
        presets = self._presets()
        self._plan_base()
        last = 0.1
        while not self._out_of_time() and not self._out_of_sims():
            self._expand_best()
            self._estimate_for(max(last, MIN_SLICE))
            entry = self._next()
            if entry is None:
                if not self.base:
                    break  # every candidate met is simulated
                continue
            row = self.simulate(entry)
            last = row.seconds
            best = self._best()
            if best and best[0] is entry:
                self._say(f"best so far {row.cycles:,} cycles ({self.sims} simulated): {entry.schedule}")
        return self._result(presets)

    def _presets(self) -> list[dict]:
        out = []
        for name, text in self.ctx.presets.items():
            try:
                parsed = Schedule.parse(text)
                cand = candidate_of(parsed, self.ctx.canonical, name)
            except FuseflowError:
                cand = None
            entry = self.add(cand, "preset", schedule=text, label=name)
            if entry is None:
                continue
            if entry.error is None and entry.sim is None:
                twin = self.by_key.get(entry.skey)
                if twin is not None and twin is not entry and twin.sim is not None:
                    entry.sim = twin.sim  # the same kernels as an earlier preset
                else:
                    self.simulate(entry)
            row = entry.sim
            out.append({"name": name, "schedule": text,
                        "cycles": row.cycles if row is not None and row.ok else None,
                        "traffic_bytes": row.traffic if row is not None and row.ok else None,
                        "verified": bool(row is not None and row.verified),
                        **({"error": entry.error or (row.error if row is not None else None)}
                           if entry.error or (row is not None and not row.ok) else {})})
        return out

    def _plan_base(self) -> None:
        """Queue the base candidates (module, step 2)."""
        graph, spec = self.ctx.graph, self.spec
        count = count_groupings(graph, spec.max_groupings + 1)
        if count > spec.max_groupings:
            self.space = {"groupings": f"more than {spec.max_groupings:,}", "mode": "moves from the presets"}
            for entry in list(self.entries.values()):
                if entry.candidate is not None and entry.error is None:
                    self._queue_moves(entry.candidate)
            return
        found = list(groupings(graph))
        self.space = {"groupings": len(found), "mode": "enumerated"}
        if len(found) * len(spec.layouts) <= DIRECT_LIMIT:
            for groups in found:
                for layout in spec.layouts:
                    cand = Candidate(ordered_groups(self.ctx.canonical, groups), layout, block=self.ctx.block)
                    heapq.heappush(self.base, (0.0, next(self.counter), cand, "grouping"))
            return
        deadline = self.start + 0.35 * self.budget
        before = self.ctx.compile_seconds
        table = _GroupTable(self, found, spec.layouts, deadline)
        self.table_seconds = self.ctx.compile_seconds - before
        for groups in found:
            for layout in spec.layouts:
                cand = Candidate(ordered_groups(self.ctx.canonical, groups), layout, block=self.ctx.block)
                heapq.heappush(self.base, (table.estimate(groups, layout), next(self.counter), cand, "grouping"))
        self._say(f"{len(found):,} groupings x {len(spec.layouts)} layouts queued by composed estimates")

    def _queue_moves(self, cand: Candidate, priority: float = 0.0) -> None:
        if not self.spec.moves:
            return
        # enumerated groupings are queued under every layout already; walking, try each layout
        layouts = (cand.layout,) if self.space.get("mode") == "enumerated" else self.spec.layouts
        for groups in grouping_moves(self.ctx.graph, cand.groups):
            regrouped = cand.regrouped(ordered_groups(self.ctx.canonical, groups))
            for layout in layouts:
                new = regrouped if layout == cand.layout else \
                    Candidate(regrouped.groups, layout, block=cand.block)  # refinements were for the other layout
                if new not in self.seen:
                    heapq.heappush(self.base, (priority, next(self.counter), new, "move"))

    def _estimate_for(self, seconds: float) -> None:
        """Compile and estimate queued candidates for about `seconds`, and on while the next
        is a neighbour of a good candidate or promises better than the best compiled candidate
        not yet simulated, as long as estimating has taken at most `ESTIMATE_SHARE` times as
        long as simulating."""
        until = time.perf_counter() + seconds
        while self.base and not self._out_of_time():
            if time.perf_counter() >= until:
                best = self._best_open()
                promising = self.base[0][0] < 0 or (best is not None and self.base[0][0] * self.scale() < best[0])
                spent = self.ctx.compile_seconds - self.table_seconds
                if best is not None and (not promising or spent > ESTIMATE_SHARE * self.sim_seconds):
                    break
            pre, _, cand, origin = heapq.heappop(self.base)
            if cand in self.seen:
                continue
            self.add(cand, origin, pre=pre)

    def _open(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.sim is None and e.error is None and e.costs is not None]

    def _best_open(self, what: str = "cycles"):
        open_ = self._open()
        if not open_:
            return None
        return min(((self.surrogate(e, what), e) for e in open_), key=lambda x: x[0])

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
        if not self.base and not self._open():
            for entry in best[TOP_EXPAND:]:
                if not entry.expanded:
                    entry.expanded = True
                    self._expand(entry)
                    if self.base:
                        break

    def _expand(self, entry: Entry) -> None:
        """Queue the neighbours of a good simulated candidate (module, step 4)."""
        cand, spec = entry.candidate, self.spec
        try:
            compiled = self._compile(entry.schedule)
        except (FuseflowError, CompileTimeout):
            return
        priority = -1.0  # before the base candidates: the neighbourhood of the best first
        found: list[tuple[Candidate, str]] = []
        kernels = [k for k in compiled.kernels if k.region is not None]
        for kernel in kernels:
            if self._out_of_time():
                break
            found += [(cand.with_order(kernel.index, o), "order") for o in other_orders(kernel, spec.orders)]
        if spec.formats:
            for _, name, meta in written_between(compiled):
                found += [(cand.with_format(name, f), "format") for f in level_formats(meta.levels, meta.mode_order)]
        if spec.lanes > 1:
            found += [(c, "lanes") for c in self._lane_variants(cand, kernels)]
        for new, origin in found:
            if new not in self.seen:
                heapq.heappush(self.base, (priority, next(self.counter), new, origin))
        self._queue_moves(cand, priority)

    def _lane_variants(self, cand: Candidate, kernels) -> list[Candidate]:
        """Each kernel's outermost loop dealt over the lanes allowed (one kernel at a time, and
        all at once); kernels run one after another, so each may use them all."""
        out, every = [], cand
        for kernel in kernels:
            var = kernel.order[0]
            lanes = min(self.spec.lanes, int(kernel.region.extent.get(var, 1)))
            if lanes < 2 or dict(cand.pars).get(kernel.index):
                continue
            out.append(cand.with_par(kernel.index, ((var, lanes),)))
            every = every.with_par(kernel.index, ((var, lanes),))
        if every != cand and every not in out:
            out.append(every)
        return out

    # -- the answer -------------------------------------------------------------------------------
    def _pareto(self) -> list[Entry]:
        points = sorted(self._simulated(), key=lambda e: (e.sim.cycles, e.sim.traffic))
        front, least = [], math.inf
        for e in points:
            if e.sim.traffic < least:
                front.append(e)
                least = e.sim.traffic
        return front

    def _result(self, presets: list[dict]) -> TuneResult:
        best = self._best()
        if not best:
            raise UserError("no candidate simulated and verified, the presets included", "tune",
                            "raise --budget, or check that the model simulates (fuseflow simulate)")
        winner = best[0]
        row = winner.sim
        reproduced = True
        if self.final_check:  # the answer as `fuseflow simulate --schedule` runs it
            again = self.ctx.simulate(winner.schedule, as_given=True)
            reproduced = again.ok and again.cycles == row.cycles
            if again.ok:
                row = again
        one_lane = None
        if self.spec.lanes > 1:
            plain = [e for e in best if e.candidate is None or not e.candidate.pars]
            if plain:
                one_lane = {"schedule": plain[0].schedule, "cycles": plain[0].sim.cycles,
                            "traffic_bytes": plain[0].sim.traffic}
        simulated = self._simulated()
        tau = {}
        pairs = [(self.identity.cycles(e.costs), self.cal.cycles(e.costs), e.sim.cycles)
                 for e in simulated if e.costs]
        if len(pairs) >= 3:
            tau = {"n": len(pairs), "uncalibrated": kendall_tau([p[0] for p in pairs], [p[2] for p in pairs]),
                   "calibrated": kendall_tau([p[1] for p in pairs], [p[2] for p in pairs])}
        compiled = [e for e in self.entries.values() if e.costs is not None]
        front = self._pareto()
        evaluated = {"simulated": self.sims, "resumed": self.resumed, "winner_at": winner.order,
                     "simulated_now": self.sims - self.resumed,
                     "estimated": sum(1 for e in compiled if e.sim is None),
                     "rejected": self.rejected, "timed_out": self.timeouts,
                     "failed": sum(1 for e in self.entries.values() if e.sim is not None and not e.sim.ok),
                     "compile_seconds": round(self.ctx.compile_seconds, 2), "space": self.space}
        kernels = []
        if winner.costs is not None:
            for k, c in zip(winner.costs, row.kernel_cycles):
                kernels.append({"group": list(k.key[0]), "order": list(k.key[1]), "cycles": c})
        return TuneResult(self.ctx.label or self.ctx.program.name, winner.schedule, row.cycles, bool(row.verified),
                          row.traffic, row.max_occupancy or 0, self.objective, self.spec.lanes, presets, evaluated,
                          self._elapsed(), kernels,
                          [{"schedule": e.schedule, "cycles": e.sim.cycles, "traffic_bytes": e.sim.traffic,
                            "max_fifo": e.sim.max_occupancy} for e in front] if self.objective == "pareto" else [],
                          tau, one_lane, reproduced,
                          calibration="calibrated" if not self.cal.is_identity else "uncalibrated")
