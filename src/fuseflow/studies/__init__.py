"""Everything that runs many simulations and reads their results.

`granularity`: the fusion study of one model (unfused, partial, full; `fuseflow.study`).
`space`, `runner`: sweeps of schedules x data points, pruned by the heuristic
(`fuseflow.fusion.estimate`), run on local processes or dask (`cluster`) into SQLite (`db`);
`analysis` and `plot` read them back. `suite`: many fusion studies as one resumable job with the
Figure-12 chart and the results page. The commands that drive them live in `fuseflow.cmdline`.
See docs/exploration.md.
"""

# token events a study simulates by default: about five minutes of the fast engine on this
# 2-core machine (memory no longer limits it: the engine streams; `--max-tokens` changes it). Here,
# not in `granularity`, so that the command's grammar reads it without importing a simulator.
MAX_TOKENS = 3e10
