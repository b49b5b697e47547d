"""The fusion table of a region in a dataflow order.

Rows are the index variables in order (plus a value row); columns are the region's views:
the tensor accesses it reads (leaves) and its op instances. A cell says how that view's
stream is produced at that variable:

- `scan A.1`: a level scanner over level 1 of A;
- `repeat`: the view lacks the variable and is broadcast along it (its reference repeated);
- `(A ∩ B)` / `(T ∪ b ∪ U)`: the op's coordinates at the variable, a merge of its operands
  (`U` is the dense universe of the variable); `+spacc[k]` marks the sparse accumulator
  whose output carries the op's coordinates at its innermost variable;
- `nest`: the op is recomputed inside a consumer's loop over the variable;
- `·`: the view does not take part at that variable.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
    >>> print(FusionTable(Region.build(p, ["T", "O"]), ["i", "l", "k", "j"]).dump())
    var   | C(k,j)   | A(i,l)   | B(l,k)   | T(i,k)       | O(i,j)
    ------+----------+----------+----------+--------------+-------------
    i     | repeat   | scan A.0 | repeat   | A            | T
    l     | ·        | scan A.1 | scan B.0 | (A ∩ B)      | ·
    k     | scan C.0 | repeat   | scan B.1 | B +spacc[l]  | (T ∩ C)
    j     | scan C.1 | ·        | ·        | ·            | C +spacc[k]
    value | array    | array    | array    | sum[l] A * B | sum[k] T * C
"""
from __future__ import annotations

from dataclasses import dataclass

from .merge import instance_merge, operand_tensor
from .nesting import Nesting
from .patterns import Merge, describe
from .region import Region


@dataclass
class Cell:
    kind: str  # scan | repeat | merge | nest | none
    text: str
    merge: Merge | None = None
    level: int | None = None


class FusionTable:
    def __init__(self, region: Region, order: list[str]):
        self.region = region
        self.nesting = Nesting(region, order)
        self.order = list(order)
        for leaf in region.leaves:
            if leaf.free:
                leaf.induce(self.nesting.pos)
        self.leaf_owner: dict[int, int] = {}  # leaf id -> the instance that reads it
        for inst in region.instances:
            for ref in inst.leaf_ids():
                self.leaf_owner[ref] = inst.id
        self.cells: dict[tuple[str, str], Cell] = {}
        for v in self.order:
            for leaf in region.leaves:
                self.cells[(v, self.leaf_key(leaf.id))] = self._leaf_cell(leaf, v)
            for inst in region.instances:
                self.cells[(v, self.inst_key(inst.id))] = self._inst_cell(inst, v)

    @staticmethod
    def leaf_key(leaf_id: int) -> str:
        return f"leaf{leaf_id}"

    @staticmethod
    def inst_key(inst_id: int) -> str:
        return f"inst{inst_id}"

    def operand_names(self, inst) -> list[str]:
        return [operand_tensor(self.region, x) for x in inst.operands]

    def merge(self, inst, v: str) -> Merge:
        return instance_merge(self.region, inst, v)

    def _leaf_cell(self, leaf, v: str) -> Cell:
        level_vars = leaf.level_vars()
        if v in level_vars:
            level = level_vars.index(v)
            return Cell("scan", f"scan {leaf.storage}.{level}", level=level)
        owner = self.leaf_owner[leaf.id]
        if v in self.nesting.nest[owner]:
            return Cell("repeat", "repeat")
        return Cell("none", "·")

    def _inst_cell(self, inst, v: str) -> Cell:
        if v in inst.local_vars:
            merge = self.merge(inst, v)
            text = describe(merge, self.operand_names(inst))
            plan = self.nesting.plan[inst.id]
            if plan.kind == "spacc" and v == self.nesting.last[inst.id]:
                text += f" +{plan}"
            return Cell("merge", text, merge)
        if v in self.nesting.nest[inst.id]:
            return Cell("nest", "nest")
        return Cell("none", "·")

    def value_text(self, inst) -> str:
        names = self.operand_names(inst)
        body = inst.op.body.to_text(names)
        if inst.reduce_vars:
            body = f"{inst.op.reduce_kind}[{','.join(inst.reduce_vars)}] {body}"
        return body

    def dump(self) -> str:
        r = self.region
        headers = [str(leaf) for leaf in r.leaves] + [
            f"{inst.tensor}({','.join(str(i) for i in inst.out_indices)})" for inst in r.instances]
        keys = [self.leaf_key(leaf.id) for leaf in r.leaves] + [self.inst_key(i.id) for i in r.instances]
        rows = [[v] + [self.cells[(v, key)].text for key in keys] for v in self.order]
        rows.append(["value"] + ["array"] * len(r.leaves) + [self.value_text(i) for i in r.instances])
        widths = [max(len(x) for x in col) for col in zip(["var"] + headers, *rows)]
        widths[1:] = [max(w, 8) for w in widths[1:]]

        def line(cells):
            return " | ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

        out = [line(["var"] + headers), "-+-".join("-" * w for w in widths)]
        out += [line(row) for row in rows]
        return "\n".join(out)
