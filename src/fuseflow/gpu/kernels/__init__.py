"""The fused CUDA kernel of a plan: its one description (`kernel_layout`), the CUDA text with slots
(`kernel_template`) filled into a source with a launcher (`codegen`), compiled by `nvcc`, and a
small set of plans covering every code path of the kernel (`covering_plans`).

    >>> from fuseflow.gpu.kernels.kernel_layout import THREADS
    >>> THREADS
    256
"""
