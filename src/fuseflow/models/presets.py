"""Fusion presets: the unfused, partial and full schedules of a model, as the reference defines them.

- `unfused`: one kernel per op, except that a softmax (row max, subtract, exp, row sum, divide)
  is one kernel, as in the reference's kernel counts (GCN: 8 kernels);
- `partial`: one kernel per statement of the model's `forward` (per layer, or per component of a
  decoder block);
- `full`: one kernel, or for decoder stacks the partial groups with each block's tail fused with
  the next block's LN+QKV (cross-layer fusion, as the reference's "fully fused" GPT-3);
- `layer1`, `layer2` (the graph models): one layer fused as in `partial`, every other op as in
  `unfused` (the reference's Figure 14: "only first layer fused", "only second layer fused").

    >>> reference_unfused.__name__
    'reference_unfused'
"""
from __future__ import annotations

from ..ir.program import IndexOp, Program, op_output
from ..schedule.schedule import statement_groups


def _contraction(op) -> bool:
    return isinstance(op, IndexOp) and bool(op.reduce_vars) and len(op.body.inputs_used()) > 1


def reference_unfused(program: Program) -> list[list[str]]:
    ops = {op_output(op): op for op in program.ops}
    consumers: dict[str, list[str]] = {n: [] for n in ops}
    for op in program.ops:
        for t in op.tensors_read:
            if t in consumers:
                consumers[t].append(op_output(op))
    line = {n: (op.loc or n).rsplit(":", 1)[0] for n, op in ops.items()}
    chain_of: dict[str, str] = {}
    for name, op in ops.items():
        if not (isinstance(op, IndexOp) and op.reduce_kind == "max") or name in chain_of:
            continue
        chain, frontier, sums = {name}, [name], set()
        while frontier:
            current = frontier.pop()
            for user in consumers[current]:
                if user in chain or line[user] != line[name] or _contraction(ops[user]):
                    continue
                chain.add(user)
                user_op = ops[user]
                if isinstance(user_op, IndexOp) and user_op.reduce_kind == "sum":
                    sums.add(user)
                if not (set(user_op.tensors_read) & sums):  # the divide by the row sum ends it
                    frontier.append(user)
        for member in chain:
            chain_of[member] = name
    groups: dict[str, list[str]] = {}
    for op in program.ops:
        n = op_output(op)
        groups.setdefault(chain_of.get(n, n), []).append(n)
    return list(groups.values())


def cross_layer(program: Program, tail_line: str, head_line: str) -> list[list[str]]:
    """Statement groups with every group of `tail_line` fused with the `head_line` group that
    reads it (the next decoder block's LN+QKV)."""
    groups = statement_groups(program)
    ops = {op_output(op): op for op in program.ops}

    def line_of(g):  # file:line of the statement
        return (ops[g[0]].loc or "").rsplit(":", 1)[0]

    merged, used = [], set()
    for k, g in enumerate(groups):
        if k in used:
            continue
        if line_of(g).endswith(tail_line):
            for j, h in enumerate(groups):
                if j not in used and j != k and line_of(h).endswith(head_line) and \
                        any(t in g for n in h for t in ops[n].tensors_read):
                    g = g + h
                    used.add(j)
                    break
        merged.append(g)
        used.add(k)
    return merged


def only_fused(unfused: list[list[str]], group: list[str]) -> list[list[str]]:
    """The `unfused` groups with those inside `group` made one, where the first of them stood.

        >>> only_fused([["a"], ["b"], ["c", "d"], ["e"]], ["b", "c", "d"])
        [['a'], ['b', 'c', 'd'], ['e']]
    """
    members = set(group)
    out: list[list[str]] = []
    for g in unfused:
        if not members & set(g):
            out.append(g)
        elif not set(g) <= members:
            raise ValueError(f"unfused group {g} straddles {group}")
        elif g[0] == next(n for u in unfused for n in u if n in members):
            out.append(list(group))
    return out


def as_schedule(groups: list[list[str]], extra: str = "layout=induced") -> str:
    return ("fusion=" + "".join("[" + ",".join(g) + "]" for g in groups) + " " + extra).strip()
