"""GPU cluster-fusion planner: GEMM -> elementwise -> GEMM chains fused across thread-block
clusters with distributed shared memory (DSM), after FlashFuser (arXiv 2512.12949).

    >>> from fuseflow.gpu import BENCHMARKS, plan_chain
    >>> result = plan_chain(BENCHMARKS["G1"], topk=3)
    >>> len(result.plans), result.plans[0].cost <= result.plans[-1].cost
    (3, True)
"""
from .benchmarks import BENCHMARKS, parse_chain
from .chains import Chain, conv_chain
from .device import Device, load_device
from .planner import Plan, PlanResult, plan_chain

__all__ = ["BENCHMARKS", "Chain", "Device", "Plan", "PlanResult", "conv_chain", "load_device",
           "parse_chain", "plan_chain"]
