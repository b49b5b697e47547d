"""Plans of a chain and their predicted cost: loop schedules (`loop_schedules`), the search space
and Rules 1-4 (`search_space`), the bytes each memory level moves (`traffic`), the time those bytes
take (`roofline`), the ranked plans (`planner`), the unfused and SMEM-only baselines (`baselines`)
and the benchmark of the best plan against them (`predicted_bench`).

    >>> from fuseflow.gpu.planning.loop_schedules import all_schedules
    >>> len(all_schedules())
    41
"""
