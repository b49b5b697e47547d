"""Sampled evaluation for candidates too large to simulate whole, with successive halving.

A candidate whose heuristic load (token events, a tile's elements for blocked schedules: as the
fusion study weighs them) is above `Sampling.above` is not simulated whole but by the
partitioned simulator (`partition.run.simulate_partitioned`) with a sample plan to a target
error, the plans of the *rungs* (`RUNGS`: +-10%, +-5%, +-2% of the 95% interval). Every such
candidate is first evaluated on the cheapest rung; the `Ladder` promotes, as asynchronous
successive halving does, a candidate to the next rung once it is among the best 1/`ETA` of its
rung (by the paired point estimate) and not already shown to be slower than the incumbent. Only
the last rung (or a whole run) can take the incumbent's place, and only when the interval of
the difference says it is faster (`Surrogate.difference`: kernels both candidates contain
cancel; the others' intervals add in quadrature).

Every sample plan is the plan `fuseflow simulate --error E --sample-seed S` uses, so that a
schedule the tuner reports as sampled reproduces its interval there.

    >>> s = Sampling(above=1e9)
    >>> s.plan(0).error, s.plan(2).error, s.level(2)
    (0.1, 0.02, 'sampled error=0.02 seed=0')
    >>> s.sampled(5e8), s.sampled(2e9), Sampling(above=None).sampled(1e12)
    (False, True, False)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UserError
from ..partition.sampled import MIN_WIDTH, SAMPLE_FROM, SamplePlan, largest_whole, whole_kernels

RUNGS = (0.10, 0.05, 0.02)  # the target errors of the successive rungs, the last the answer's
ETA = 3  # a rung's best 1/ETA go on to the next
SAMPLE_ABOVE = 1e9  # token events: a candidate estimated above is sampled (GCN Cora `partial`, 1.9e8: ~4 s whole)
FINAL_WHOLE = 4.0  # the answer's final run is whole when its load is at most this many times `above`
# a sampled candidate whose kernels too short to sample (a sample runs them whole) hold more than this many
# times `above` is not evaluated (GPT-3 Small scalar: attention kernels with the 12 heads outermost, 1e11 events)
WHOLE_ALLOWANCE = 20.0


@dataclass(frozen=True)
class Sampling:
    """When and how the tuner samples: candidates above `above` token events (None: never),
    on the rungs' target errors, with windows drawn by `seed`; `min_width` and `whole_below` as
    in `SamplePlan` (other than their defaults, `fuseflow simulate --error` samples otherwise)."""

    above: float | None = SAMPLE_ABOVE
    rungs: tuple = RUNGS
    seed: int = 0
    eta: int = ETA
    min_width: int = MIN_WIDTH
    whole_below: int = SAMPLE_FROM

    def __post_init__(self):
        if self.above is not None and self.above < 0:
            raise UserError(f"the sampling threshold must be at least 0 token events, not {self.above!r}",
                            "--sample-above")
        if not self.rungs or any(not 0 < e < 1 for e in self.rungs) or list(self.rungs) != sorted(self.rungs)[::-1]:
            raise UserError(f"sampling rungs {self.rungs!r} must be errors in (0, 1), loosest first", "tune")

    @property
    def top(self) -> int:
        return len(self.rungs) - 1

    def sampled(self, load: float) -> bool:
        """Whether a candidate of this heuristic load is evaluated sampled."""
        return self.above is not None and load > self.above

    def final_whole(self, load: float) -> bool:
        """Whether the answer's final run can be whole."""
        return self.above is None or load <= FINAL_WHOLE * self.above

    def reached(self, rung: int, low: float, high: float, cycles: float) -> int:
        """The tightest rung (at least `rung`) whose target an interval [low, high] around
        `cycles` already meets: a kernel whose windows all ran, or whose sample came out
        tight, need not be sampled again for a looser-than-that target.

            >>> Sampling().reached(0, 95, 105, 100), Sampling().reached(0, 99, 101, 100)
            (1, 2)
        """
        half = (high - low) / 2 / cycles if cycles else 0.0
        return max([rung] + [r for r, target in enumerate(self.rungs) if half <= target])

    def too_large(self, compiled, costs, block: int | None) -> str | None:
        """Why a candidate cannot be evaluated within reason (None: it can): sampled, its kernels
        too short to cut into windows enough, which a sample runs whole, would together pass
        `WHOLE_ALLOWANCE` times the sampling threshold."""
        if not self.sampled(load(costs, block)):
            return None
        whole = whole_kernels(compiled, {k.index: load([k], block) for k in costs}, self.plan(0))
        run_whole = sum(w.load for w in whole)
        if run_whole <= WHOLE_ALLOWANCE * self.above:
            return None
        return (f"too large to evaluate: its kernels of fewer than {self.whole_below} windows, which a sample runs "
                f"whole, hold {run_whole:.2g} token events, over {WHOLE_ALLOWANCE:g}x --sample-above "
                f"{self.above:.2g} (the largest {largest_whole(whole)})")

    def plan(self, rung: int) -> SamplePlan:
        return SamplePlan(error=self.rungs[rung], seed=self.seed, min_width=self.min_width,
                          whole_below=self.whole_below)

    def level(self, rung: int) -> str:
        """The search log's key of a rung (rows of a rung are logged apart from whole runs)."""
        plain = (self.min_width, self.whole_below) == (MIN_WIDTH, SAMPLE_FROM)
        return f"sampled error={self.rungs[rung]:g} seed={self.seed}" + \
            ("" if plain else f" width={self.min_width} from={self.whole_below}")


def load(costs, block: int | None) -> float:
    """A candidate's heuristic load: its kernels' token events, a tile's elements each where blocked."""
    return sum(k.tokens for k in costs or ()) * (block or 1) ** 2


@dataclass
class Ladder:
    """The rungs of successive halving: which candidates were evaluated on which rung, and which
    were promoted (see the module)."""

    sampling: Sampling
    rungs: list = field(default_factory=list)  # rung -> entries that reached it
    promoted: set = field(default_factory=set)  # ids of entries promoted from their rung
    evaluations: list = field(default_factory=list)  # rung -> sampled evaluations with its plan

    def __post_init__(self):
        self.rungs = [[] for _ in self.sampling.rungs]
        self.evaluations = [0] * len(self.sampling.rungs)

    def add(self, entry, reached: int) -> None:
        """A candidate whose sampled interval meets rung `reached`'s target."""
        if entry not in self.rungs[reached]:
            self.rungs[reached].append(entry)

    def counts(self) -> dict:
        """Sampled evaluations by the target error of their plan."""
        return {f"{e:.0%}": n for e, n in zip(self.sampling.rungs, self.evaluations)}

    def promotion(self, value, hopeful, exhausted: bool = False):
        """The next (entry, rung) to evaluate again on a tighter rung, or None: from the highest
        rung down, an entry among the best 1/eta of its rung by `value(entry)` (all of them when
        `exhausted`: nothing new is left to evaluate) for which `hopeful(entry)` holds."""
        for r in range(self.sampling.top - 1, -1, -1):
            ranked = sorted(self.rungs[r], key=value)
            best = ranked if exhausted else ranked[:len(ranked) // self.sampling.eta]
            for entry in best:
                if id(entry) not in self.promoted and hopeful(entry):
                    self.promoted.add(id(entry))
                    return entry, r + 1
        return None
