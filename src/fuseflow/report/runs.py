"""What a simulation leaves for its report: steps per node, tokens and occupancy per stream, and
what stopped it.

`Recorder` wraps an engine's `run_graph` and keeps, per kernel graph, what the HTML report shows
on a node: how many steps (busy cycles) it took, how many tokens each of its streams carried and
how many waited in each channel at most. `Problem` is a deadlock, a mismatch or another error,
with the kernel it happened in. `fuseflow.simreport` fills both while it simulates.

    >>> Problem("deadlock: n3.crd full", 1, "deadlock").kernel
    1
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GraphStats:
    cycles: int = 0
    steps: dict[int, int] = field(default_factory=dict)  # node id -> steps
    tokens: dict[str, int] = field(default_factory=dict)  # stream ("n3.crd") -> tokens
    occupancy: dict[str, int] = field(default_factory=dict)  # stream -> most tokens waiting at once


class Recorder:
    """A `run_graph` that remembers each graph's statistics by graph name."""

    def __init__(self, run_graph):
        self.run_graph = run_graph
        self.stats: dict[str, GraphStats] = {}

    def __call__(self, graph, tensors, hw=None):
        run = self.run_graph(graph, tensors, hw)
        self.record(graph, run)
        return run

    def record(self, graph, run) -> None:
        """Keep a graph run's statistics (an `on_run` callback of `simulate` and `execute`)."""
        self.stats[graph.name] = GraphStats(
            int(run.cycles), {int(k): int(v) for k, v in run.node_steps.items()},
            {str(s): int(n) for s, n in run.stream_tokens.items()},
            {str(s): int(n) for s, n in (run.max_occupancy or {}).items()})


@dataclass
class Problem:
    """What stopped a simulation, and in which kernel (its position in the schedule)."""

    message: str
    kernel: int | None = None
    kind: str = "error"  # deadlock | mismatch | error

