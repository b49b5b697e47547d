"""Partitioned simulation: kernels run on windows of their outermost loop (`windows`), all of
them as dask tasks with their cycles combined (`sharded`), or a stratified sample of them with a
confidence interval for the cycles (`sampled`, statistics in `estimate`)."""
