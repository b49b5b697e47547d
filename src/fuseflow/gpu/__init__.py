"""GPU cluster-fusion planner: GEMM -> elementwise -> GEMM chains fused across thread-block
clusters with distributed shared memory (DSM), after FlashFuser (arXiv 2512.12949).

One sub-package per job, each importing only those listed before it:

* ``problem``: the chains to fuse, the paper's benchmark chains, the device model;
* ``planning``: loop schedules, the search space, the bytes each level moves, the time model,
  the ranked plans, the baselines and the predicted benchmark;
* ``kernels``: the CUDA kernel of a plan (its layout, template and source), nvcc, and the
  plans that cover every code path of the kernel;
* ``emulation``: numpy runs of a plan and of a kernel's layout that check outputs and bytes;
* ``measuring``: kernels run and timed on a CUDA GPU, and the records of what was measured;
* ``readout``: the measurements held against the model, the measured section of docs/gpu.md,
  numbers formatted for the command line.

    >>> from fuseflow.gpu import BENCHMARKS, plan_chain
    >>> result = plan_chain(BENCHMARKS["G1"], topk=3)
    >>> len(result.plans), result.plans[0].cost <= result.plans[-1].cost
    (3, True)
"""
from .planning.planner import Plan, PlanResult, plan_chain
from .problem.benchmarks import BENCHMARKS, parse_chain
from .problem.chains import Chain, conv_chain
from .problem.device import Device, load_device

__all__ = ["BENCHMARKS", "Chain", "Device", "Plan", "PlanResult", "conv_chain", "load_device",
           "parse_chain", "plan_chain"]
