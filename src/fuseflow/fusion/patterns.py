"""Which coordinates an op must visit: the sparsity pattern of its body.

Multiplication keeps only coordinates where both operands are stored (intersection),
addition those where either is (union), and a function that is nonzero at zero (exp, a
subtraction of a broadcast value, a max reduction over implicit zeros) must visit every
coordinate (the universe). This keeps fused graphs exact with respect to dense semantics.

    >>> from fuseflow.ir.expr import Binary, In, Unary, Const
    >>> merge_at(Binary("mul", In(0), In(1)), [True, True])
    Intersect(parts=(Operand(index=0), Operand(index=1)))
    >>> merge_at(Binary("sub", In(0), In(1)), [True, False])   # x - rowmax: dense
    Union(parts=(Operand(index=0), Universe()))
    >>> merge_at(Binary("max", Binary("mul", In(0), Const(2.0)), Const(0.0)), [True])
    Operand(index=0)
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import combinations

from ..ir.background import IDENTITY, _same, evaluate
from ..ir.expr import Binary, Compare, Const, Expr, In, Select, Unary

ZERO_PRESERVING = {"neg", "sqrt", "tanh", "erf", "abs"}  # f(0) == 0


class Merge:
    """A merge tree over an op's operands at one variable."""


@dataclass(frozen=True)
class Operand(Merge):
    index: int


@dataclass(frozen=True)
class Universe(Merge):
    pass


@dataclass(frozen=True)
class Nothing(Merge):
    pass


@dataclass(frozen=True)
class Intersect(Merge):
    parts: tuple


@dataclass(frozen=True)
class Union(Merge):
    parts: tuple


def _and(parts) -> Merge:
    flat = []
    for p in parts:
        if isinstance(p, Nothing):
            return Nothing()
        if isinstance(p, Universe):
            continue
        flat.extend(p.parts if isinstance(p, Intersect) else [p])
    flat = list(dict.fromkeys(flat))
    # absorption: a ∩ (a ∪ b) = a
    flat = [p for p in flat if not (isinstance(p, Union) and any(q in p.parts for q in flat if q is not p))]
    if not flat:
        return Universe()
    return flat[0] if len(flat) == 1 else Intersect(tuple(flat))


def _or(parts) -> Merge:
    flat = []
    for p in parts:
        if isinstance(p, Nothing):
            continue
        flat.extend(p.parts if isinstance(p, Union) else [p])
    flat = list(dict.fromkeys(flat))
    # absorption: a ∪ (a ∩ b) = a
    flat = [p for p in flat if not (isinstance(p, Intersect) and any(q in p.parts for q in flat if q is not p))]
    if any(isinstance(p, Universe) for p in flat):
        flat = [p for p in flat if not isinstance(p, Universe)] + [Universe()]
        if len(flat) == 1:
            return Universe()
    if not flat:
        return Nothing()
    return flat[0] if len(flat) == 1 else Union(tuple(flat))


def pattern(expr: Expr, indexes: list[bool]) -> Merge:
    """Merge tree of `expr` at one variable; `indexes[k]` says whether operand k has the variable
    (an operand without it is broadcast along it, so it is nonzero everywhere there)."""
    if isinstance(expr, In):
        return Operand(expr.index) if indexes[expr.index] else Universe()
    if isinstance(expr, Const):
        return Nothing() if expr.value == 0 else Universe()
    if isinstance(expr, Unary):
        inner = pattern(expr.arg, indexes)
        return inner if expr.op in ZERO_PRESERVING else _or([inner, Universe()])
    if isinstance(expr, Binary):
        a, b = pattern(expr.lhs, indexes), pattern(expr.rhs, indexes)
        if expr.op == "mul":
            return _and([a, b])
        return _or([a, b])  # add, sub, max, min, div: a result can be nonzero where either is
    if isinstance(expr, Compare):
        a, b = pattern(expr.lhs, indexes), pattern(expr.rhs, indexes)
        return _or([a, b]) if expr.pred in ("gt", "lt", "ne") else Universe()
    if isinstance(expr, Select):
        return _or([pattern(expr.if_true, indexes), pattern(expr.if_false, indexes)])
    raise TypeError(expr)


def skip_value(op, out_bg: float, reduced: bool):
    """The result value an op needs no visit for at a variable (`merge_at`'s `skip`): a reduction
    skips its identity at a reduction variable (or where the output's background is it; None:
    visit everything), an elementwise op its output's background `out_bg`."""
    if not op.reduce_vars:
        return out_bg
    identity = IDENTITY[op.reduce_kind]
    return identity if reduced or out_bg == identity else None


MAX_SUBSETS = 10  # operands with the variable beyond which every coordinate is visited


def merge_at(expr: Expr, indexes: list[bool], backgrounds: list | None = None, skip=0.0,
             dense: bool = False, full: list[bool] | None = None) -> Merge:
    """The merge at one variable.

    `indexes[k]`: operand k has the variable (an operand without it is broadcast along it);
    `backgrounds[k]`: the value operand k holds where it stores nothing (None: stored everywhere;
    default all 0); `skip`: the result value that needs no visit (the output's background, or
    the reduction identity at a reduction variable; None: visit everything); `dense` forces the
    universe. A set P of stored operands needs a visit when the body, with the other operands at
    their backgrounds, can differ from `skip`; the merge is the union over the minimal such P of
    the intersection of P (the universe when P is empty). `full[k]` says operand k's stream holds
    every coordinate (a dense level), so joining it by intersection drops nothing."""
    n = len(indexes)
    backgrounds = [0.0] * n if backgrounds is None else list(backgrounds)
    sparse = [k for k in range(n) if indexes[k] and backgrounds[k] is not None]
    if skip is None or dense or len(sparse) > MAX_SUBSETS:
        merged = _or([Operand(k) for k in range(n) if indexes[k]] + [Universe()])
    else:
        minimal: list[set[int]] = []
        for size in range(len(sparse) + 1):
            for subset in combinations(sparse, size):
                if any(m <= set(subset) for m in minimal):
                    continue
                values = [None if (k in subset or not indexes[k] or backgrounds[k] is None) else
                          backgrounds[k] for k in range(n)]
                if not _same(evaluate(expr, values), skip):
                    minimal.append(set(subset))
        merged = _lattice(expr, minimal, sparse, indexes, backgrounds)
    present = set(operand_indices(merged))
    # every operand with the variable must join so that its stream stays aligned: an operand
    # stored everywhere by intersection (it drops nothing), a sparse one by union
    full = full or [False] * n
    dense_missing = [Operand(k) for k in range(n) if indexes[k] and k not in present
                     and (backgrounds[k] is None or full[k])]
    sparse_missing = [Operand(k) for k in sparse if k not in present and not full[k]]
    if sparse_missing:
        merged = _or([merged, *sparse_missing])
    if dense_missing:
        merged = _and([merged, *dense_missing]) if not isinstance(merged, (Universe, Nothing)) else \
            _and(dense_missing)
    return merged


def _lattice(expr: Expr, minimal: list[set], sparse: list[int], indexes: list[bool], backgrounds: list) -> Merge:
    """The union over the `minimal` sets of their intersections, as a tree the lowering can
    stream: operands all of them share are factored out (`(a+b)*E` is `E ∩ (a ∪ b)`, not
    `(a ∩ E) ∪ (b ∩ E)`, which would stream E twice); and if an operand inside an intersection
    would read as missing at a visited coordinate where its value matters (`(a+b)*(c+b)`:
    `b ∪ (a ∩ c)` visits b's coordinates, where c's value comes only through the intersection),
    or an operand still appears twice, the union of every operand instead (more coordinates, each
    operand's own values)."""
    parts = [_and([Operand(k) for k in sorted(m)]) if m else Universe() for m in minimal]
    common = set.intersection(*minimal) if len(minimal) > 1 else set()
    if common:
        rest = [_and([Operand(k) for k in sorted(m - common)]) if m - common else Universe() for m in minimal]
        merged = _and([Operand(k) for k in sorted(common)] + [_or(rest)])
    else:
        merged = _or(parts)
    uses = list(operand_indices(merged))
    if len(uses) == len(set(uses)) and not _hidden(expr, minimal, sparse, indexes, backgrounds):
        return merged
    return _or([Operand(k) for k in sorted(set().union(*minimal))] + [Universe() for m in minimal if not m])


PROBES = 8  # random operand values per case of `_hidden`


def _hidden(expr: Expr, minimal: list[set], sparse: list[int], indexes: list[bool], backgrounds: list) -> bool:
    """Whether some coordinate is visited where an operand is stored but no visited intersection
    holding it is complete, and its value changes the result (probed with random values)."""
    if len(minimal) < 2 or all(len(m) < 2 for m in minimal):
        return False
    rng = random.Random(0)
    inside = set().union(*(m for m in minimal if len(m) > 1))
    for size in range(2, len(sparse) + 1):
        for subset in combinations(sparse, size):
            present = set(subset)
            if not any(m <= present for m in minimal):
                continue  # not visited
            for k in present & inside:
                if any(k in m and m <= present for m in minimal):
                    continue  # delivered by a complete intersection
                for _ in range(PROBES):  # signed values: max(a, -a*c) hides c only for positive ones
                    values = [rng.choice((-1, 1)) * rng.uniform(0.5, 2.0)
                              if (j in present or not indexes[j] or backgrounds[j] is None)
                              else backgrounds[j] for j in range(len(indexes))]
                    without = list(values)
                    without[k] = backgrounds[k]
                    if not _same(evaluate(expr, values), evaluate(expr, without)):
                        return True
    return False


def operand_indices(merge: Merge):
    if isinstance(merge, Operand):
        yield merge.index
    elif isinstance(merge, (Intersect, Union)):
        for part in merge.parts:
            yield from operand_indices(part)


def describe(merge: Merge, names: list[str]) -> str:
    if isinstance(merge, Operand):
        return names[merge.index]
    if isinstance(merge, Universe):
        return "U"
    if isinstance(merge, Nothing):
        return "∅"
    sym = " ∩ " if isinstance(merge, Intersect) else " ∪ "
    return "(" + sym.join(describe(p, names) for p in merge.parts) + ")"
