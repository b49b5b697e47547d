"""Parallel scaling of masked softmax attention (reference §6.4, Fig. 15): cycles and speedup over
P = 1 for `par=VAR:P`, measured in one run on the fast engine with every output verified.

    python bench/parallel_scaling.py            # tables
    python bench/parallel_scaling.py --plot docs  # and docs/parallel_factor.png, docs/parallel_location.png

The program is softmax(masked_fill(Q·Kᵀ·scale, M == 0, -inf)) · V over (heads, seq, dk) inputs, the
attention of `fuseflow.models.gpt3.DecoderBlock`, with a BigBird block mask, fused into one kernel.
Level 1 is the outermost variable of its dataflow order (the heads), level 2 the next (the rows).
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import torch

import fuseflow
from fuseflow.fusion.compile import compile_schedule
from fuseflow.models.gpt3 import DecoderBlock, bigbird_mask
from fuseflow.pipeline import simulate

FACTORS = (1, 2, 4, 8, 16, 32, 64)


class Attention(torch.nn.Module):
    def __init__(self, heads: int, dk: int):
        super().__init__()
        self.block = DecoderBlock(heads * dk, heads, 4)

    def forward(self, M, Q, K, V):
        return self.block.attention(Q, K, V, M)


def attention_program(heads: int, seq: int, dk: int, block: int, seed: int = 0):
    """(program, dense inputs) of the attention benchmark."""
    torch.manual_seed(seed)
    M = torch.tensor(bigbird_mask(seq, block, seed, random_blocks=1, global_blocks=1), dtype=torch.float32)
    inputs = (M.to_sparse_csr(), torch.randn(heads, seq, dk), torch.randn(heads, seq, dk), torch.randn(heads, seq, dk))
    program = fuseflow.from_torch(Attention(heads, dk), *inputs)
    data = {n: (t.to_dense() if t.layout != torch.strided else t).numpy().astype(np.float64)
            for n, t in zip(program.inputs, inputs)}
    return program, data


def measure(program, data, schedules: dict[str, str]) -> dict[str, int]:
    """Cycles of each named schedule (outputs verified against the numpy reference)."""
    found = {}
    for name, schedule in schedules.items():
        result = simulate(program, schedule, data)
        assert result.verified
        found[name] = result.cycles
    return found


def report(title: str, cycles: dict[str, int], base: int) -> None:
    print(f"\n{title}\n{'configuration':<24}{'cycles':>12}{'speedup':>10}{'of linear':>11}")
    for name, c in cycles.items():
        lanes = int(np.prod([int(x.split(":")[1]) for x in name.split(",")])) if ":" in name else 1
        print(f"{name:<24}{c:>12,}{base / c:>9.2f}x{base / c / lanes:>10.0%}")


def plot(out: str, factors: dict[str, dict[int, float]], location: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    top = max(max(f) for f in factors.values())
    ax.plot([1, top], [1, top], "k--", lw=1, label="linear (published: near-linear)")
    for label, speedups in factors.items():
        ax.plot(list(speedups), list(speedups.values()), "o-", label=label)
    ax.set(xscale="log", yscale="log", xlabel="parallel factor P", ylabel="speedup over P = 1",
           title="Masked attention: parallel factor sweep")
    ax.set_xticks(list(FACTORS), [str(f) for f in FACTORS])
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "parallel_factor.png"), dpi=120)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    published = {"level 1, P=2": 2.0, "level 2, P=2": 2.0, "level 1, P=4": 4.0, "level 2, P=4": 4.0,
                 "both, P=4 each": 16.0}
    names = list(published)
    x = np.arange(len(names))
    ax.bar(x - 0.2, [published[n] for n in names], 0.4, label="published (§6.4)")
    ax.bar(x + 0.2, [location[n] for n in names], 0.4, label="fuseflow (measured)")
    ax.set_xticks(x, names, rotation=20, fontsize=8)
    ax.set(ylabel="speedup over P = 1", title="Masked attention: parallel location")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "parallel_location.png"), dpi=120)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--dk", type=int, default=8)
    ap.add_argument("--block", type=int, default=8)
    ap.add_argument("--plot", metavar="DIR", help="write the two figures into DIR")
    args = ap.parse_args(argv)
    program, data = attention_program(args.heads, args.seq, args.dk, args.block)
    kernel = compile_schedule(program, "full", {n: v.shape for n, v in data.items()}).kernels[0]
    outer, inner = kernel.order[:2]
    extent = kernel.region.extent
    print(f"attention heads={args.heads} seq={args.seq} dk={args.dk}, mask density "
          f"{data[program.inputs[0]].mean():.2f}; order {','.join(kernel.order)}: level 1 = {outer} "
          f"(extent {extent[outer]}), level 2 = {inner} (extent {extent[inner]})")
    base = measure(program, data, {"P=1": "full"})["P=1"]
    factors = {}
    for level, v in (("level 1", outer), ("level 2", inner)):
        ps = [p for p in FACTORS if p <= extent[v]]
        cycles = measure(program, data, {f"{v}:{p}": f"full par={v}:{p}" for p in ps})
        report(f"parallel factor sweep at {level} ({v})", cycles, base)
        factors[f"{level} ({v}, {extent[v]} iterations)"] = {p: base / cycles[f"{v}:{p}"] for p in ps}
    configs = {"level 1, P=2": f"{outer}:2", "level 2, P=2": f"{inner}:2", "level 1, P=4": f"{outer}:4",
               "level 2, P=4": f"{inner}:4", "both, P=4 each": f"{outer}:4,{inner}:4"}
    cycles = measure(program, data, {par: f"full par={par}" for par in configs.values()})
    report("parallel location (published: 2.00x, 2.00x, 4.00x, 4.00x, 16.0x)", cycles, base)
    if args.plot:
        plot(args.plot, factors, {name: base / cycles[par] for name, par in configs.items()})


if __name__ == "__main__":
    main()
