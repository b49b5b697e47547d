"""What the planner is given: a GEMM -> elementwise -> GEMM chain (`chains`), the paper's 26
benchmark chains (`benchmarks`) and the device's bandwidths and capacities (`device`).

    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> BENCHMARKS["G1"].kind, BENCHMARKS["S1"].kind
    ('ffn', 'gated')
"""
