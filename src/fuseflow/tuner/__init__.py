"""`fuseflow tune` and `fuseflow.tune`: the schedule tuner, the simulator in the loop.

- `space`: groupings of the ops, candidates and their schedule strings;
- `costs`: the heuristic's per-kernel features, its calibrated form, Kendall's tau;
- `context`: compile, estimate and simulate a candidate as `fuseflow simulate` does;
- `moves`: the candidate generator (base groupings by composed estimates, grouping moves,
  a good candidate's neighbours: orders, formats, lanes);
- `surrogate`: a candidate's cost from the kernels simulated so far and the calibrated estimate;
- `search`: the search loop (presets, compile and estimate, simulate the most promising, expand);
- `judge`: sampled evaluation of large candidates, successive halving, the incumbent's rule;
- `parallel`: evaluations on a dask cluster (`--scheduler`);
- `result`: `TuneResult`, what a tune returns (`--json`), and its Pareto fronts;
- `chart`: the fronts drawn (`--plot`);
- `log`: the SQLite search log that a killed tune resumes from;
- `calibrate`: the training set and the fit behind `calibration/<hw>.json`;
- `run`: `fuseflow.tune(...)`.
"""
