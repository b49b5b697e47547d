"""Design-space exploration: sweeps of schedules x data points into SQLite, a heuristic cost model
that ranks schedules without simulating them, pruning built on it, and charts.

    fuseflow sweep tests/mlir/matmul_chain.mlir --granularity "full layout=induced" --orders all \\
        --density 0.05 --density 0.3 --db sweep.db [--prune 2] [--jobs 2 | --executor dask --scheduler ADDR]
    fuseflow plot sweep.db -o charts/

See docs/exploration.md.
"""
from ..ir.stats import DataStats
from .heuristic import CostModel, Estimate, estimate

__all__ = ["CostModel", "DataStats", "Estimate", "estimate"]
