"""Suites of fusion studies: many (model, dataset, schedule) tasks as one resumable job on dask,
into the sweep store, with the Figure-12 chart and the results page (`fuseflow study suite`).

`spec` reads suites (TOML; `figure12.toml` is built in), `run` runs their tasks and reads their
rows back as a study's, `page` writes the results page and the chart. See docs/exploration.md.
"""
