"""Fit the heuristic's constants to simulated kernels (`fuseflow tune --calibrate`).

The training set (`TRAINING`) is kept apart from the validation bench's cases
(`bench/tune_validation.py`): MLIR test programs of one and two ops at other densities and
seeds, GCN and GraphSAGE on small synthetic twins of Cora (not karate), and the small sparse
autoencoder with other weights. For each case the presets and a random sample of candidates
(random groupings and layouts, some with another order for one group or another format for one
tensor between kernels) are simulated whole; every kernel gives one sample (its features, its
simulated cycles) for `costs.fit`. The fitted constants are written to
`tuner/calibration/<hw>.json` with, per case, Kendall's tau between estimated and simulated
cycles of the candidates before and after.
"""
from __future__ import annotations

import random
import sys
import time

from ..errors import FuseflowError
from .context import TuneContext
from .costs import Calibration, fit, hw_key, kendall_tau, save_calibration
from .space import Candidate, groupings, level_formats, ordered_groups

# (kind, name, options): kind mlir (a test program at a density and seed) or model (a built-in one)
TRAINING = [
    ("mlir", "tests/mlir/matmul_chain.mlir", {"density": 0.05, "seed": 1}),
    ("mlir", "tests/mlir/matmul_chain.mlir", {"density": 0.3, "seed": 2}),
    ("mlir", "tests/mlir/relu.mlir", {"density": 0.2, "seed": 1}),
    ("mlir", "tests/mlir/sddmm_masked.mlir", {"density": 0.2, "seed": 1}),
    ("mlir", "tests/mlir/transpose.mlir", {"density": 0.3, "seed": 1}),
    ("mlir", "tests/mlir/empty_init.mlir", {"density": 0.2, "seed": 1}),
    ("mlir", "tests/mlir/constants.mlir", {"density": 0.2, "seed": 1}),
    ("mlir", "tests/mlir/spmm_ikj.mlir", {"density": 0.05, "seed": 1}),
    ("mlir", "tests/mlir/sddmm.mlir", {"density": 0.2, "seed": 1}),
    ("mlir", "tests/mlir/batch_matmul.mlir", {"density": 0.2, "seed": 1}),
    ("mlir", "tests/mlir/reshape.mlir", {"density": 0.3, "seed": 1}),
    ("mlir", "tests/mlir/args_out_of_order.mlir", {"density": 0.2, "seed": 1}),
    ("mlir", "tests/mlir/integers.mlir", {"density": 0.2, "seed": 1}),
    ("mlir", "tests/mlir/spmv.mlir", {"density": 0.1, "seed": 2}),
    ("mlir", "tests/mlir/spmm_jik.mlir", {"density": 0.3, "seed": 1}),
    ("model", "gcn", {"dataset": "synthetic:cora", "scale": 0.03, "seed": 1}),
    ("model", "graphsage", {"dataset": "synthetic:cora", "scale": 0.02, "seed": 1}),
    ("model", "sae", {"dataset": "small", "seed": 1, "density": 0.2}),
]
PER_CASE = 30  # candidates sampled per case, beside the presets
SMALL_SPACE = 300  # joint spaces up to this many points are sampled whole
SLOW = 12.0  # candidates estimated above this many times the cheapest preset are not simulated


def training_context(kind: str, name: str, options: dict) -> TuneContext:
    from ..frontend import from_mlir  # noqa: PLC0415
    from ..models.registry import build  # noqa: PLC0415 - models load torch (slow)

    if kind == "mlir":
        return TuneContext.from_program(from_mlir(name), seed=options.get("seed", 0),
                                        density=options.get("density", 0.1), label=name)
    options = dict(options)
    case = build(name, options.pop("dataset", None), **options)
    return TuneContext(case.program, case.inputs, case.presets, label=f"{name} {case.dataset}",
                       seed=options.get("seed", 0))


def sample_candidates(ctx: TuneContext, count: int, rng: random.Random) -> list[str]:
    """Random candidates: of the joint space (`exhaustive.joint_space` with three other orders
    per group and formats) where it has at most `SMALL_SPACE` points, else a grouping and a
    layout, sometimes with another order for one group or another format for one tensor written
    between kernels."""
    from .exhaustive import SpaceTooLarge, joint_space  # noqa: PLC0415
    from .space import SpaceSpec  # noqa: PLC0415

    try:
        points = joint_space(ctx, SpaceSpec(orders=3, formats=True), limit=SMALL_SPACE,
                             deadline=time.perf_counter() + 15)
        return [p.schedule for p in rng.sample(points, min(len(points), 2 * count))]
    except SpaceTooLarge:
        pass
    found = []
    for n, groups in enumerate(groupings(ctx.graph)):
        if n >= 5000:
            break
        found.append(groups)
    out = []
    for groups in rng.sample(found, min(len(found), count)):
        cand = Candidate(ordered_groups(ctx.canonical, groups), rng.choice(("induced", "declared")), block=ctx.block)
        out.append(cand.schedule)
        if rng.random() < 0.5:
            try:
                compiled = ctx.compile(cand.schedule)
            except FuseflowError:
                continue
            kernels = [k for k in compiled.kernels if k.region is not None]
            if not kernels:
                continue
            kernel = rng.choice(kernels)
            from ..fusion.nesting import valid_orders  # noqa: PLC0415

            orders = [o for _, o in zip(range(24), valid_orders(kernel.region)) if o != kernel.order]
            if orders:
                out.append(cand.with_order(kernel.index, rng.choice(orders)).schedule)
            outs = [(kernel, name) for kernel in kernels for name in kernel.region.outputs
                    if any(name in k.graph.tensors for k in kernels if k is not kernel)]
            if outs:
                kernel, name = rng.choice(outs)
                meta = kernel.graph.tensors[name]
                if not meta.block:
                    out.append(cand.with_format(name, rng.choice(level_formats(meta.levels, meta.mode_order))).schedule)
    return out


def collect(cases=None, per_case: int = PER_CASE, seed: int = 0, hw=None, progress: bool = True):
    """Simulate the training candidates; per case, (kernel costs, kernel cycles) and (kernel
    costs, total cycles) per candidate."""
    samples, per = {}, {}
    for kind, name, options in cases or TRAINING:
        start = time.perf_counter()
        ctx = training_context(kind, name, options)
        ctx.hw = hw
        rng = random.Random(f"{seed}:{name}:{sorted(options.items())}")
        schedules = list(dict.fromkeys(list(ctx.presets.values()) + sample_candidates(ctx, per_case, rng)))
        rows, cheapest, kernels = [], None, []
        for text in schedules:
            try:
                compiled = ctx.compile(text)
            except FuseflowError:
                continue
            costs = ctx.costs(compiled)
            raw = Calibration.identity().cycles(costs)
            if cheapest is not None and raw > SLOW * cheapest:
                continue
            row = ctx.simulate(text, compiled)
            if not row.ok or len(row.kernel_cycles) != len(costs):
                continue
            cheapest = raw if cheapest is None else min(cheapest, raw)
            kernels.append((costs, row.kernel_cycles))
            rows.append((costs, row.cycles))
        label = f"{name} " + " ".join(f"{k}={v}" for k, v in sorted(options.items()))
        per[label], samples[label] = rows, kernels
        if progress:
            print(f"calibrate: {ctx.label}: {len(rows)} candidates simulated, {time.perf_counter() - start:.1f} s",
                  file=sys.stderr, flush=True)
    return samples, per


def calibrate(cases=None, per_case: int = PER_CASE, seed: int = 0, hw=None, progress: bool = True,
              path: str | None = None) -> Calibration:
    """Collect, fit, report each case's tau before and after, and store the constants."""
    samples, per = collect(cases, per_case, seed, hw, progress)
    calibration = fit(list(samples.values()), hw_key(hw))
    identity = Calibration.identity()
    taus = {}
    for case, rows in per.items():
        sims = [c for _, c in rows]
        taus[case] = {"candidates": len(rows),
                      "uncalibrated": _round(kendall_tau([identity.cycles(k) for k, _ in rows], sims)),
                      "calibrated": _round(kendall_tau([calibration.cycles(k) for k, _ in rows], sims))}
    calibration.fitted.update({"cases": taus, "seed": seed, "per_case": per_case})
    written = save_calibration(calibration, path)
    if progress:
        print(f"calibrate: {sum(map(len, samples.values()))} candidates; wrote {written}", file=sys.stderr)
    return calibration


def _round(x):
    return None if x is None else round(x, 3)
