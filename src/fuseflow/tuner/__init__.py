"""`fuseflow tune` and `fuseflow.tune`: the schedule tuner, the simulator in the loop.

- `space`: groupings of the ops, candidates and their schedule strings;
- `costs`: the heuristic's per-kernel features, its calibrated form, Kendall's tau;
- `context`: compile, estimate and simulate a candidate as `fuseflow simulate` does;
- `search`: the search (presets, base candidates, surrogate, expansion) and its `TuneResult`;
- `log`: the SQLite search log that a killed tune resumes from;
- `calibrate`: the training set and the fit behind `calibration/<hw>.json`;
- `run`: `fuseflow.tune(...)`.
"""
