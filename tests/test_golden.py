"""Golden fusion tables and graphs: a change in lowering shows up as a diff here.

Regenerate after an intended change with `python tests/test_golden.py` and review the diff.
The (A·B)·C graph was checked by hand against the reference's worked example (order i,l,k,j
here is its i,k,j,l): A scanned at i then l; B's root repeated over i; A ∩ B at l; A's reference
repeated over k; spacc over l with inner k; T ∩ C at k; C scanned at j with T's values repeated
over j; spacc over k with inner j; writers for O's two levels and values. As in the reference's
`insert-iterate-locate` pass, an intersection with a dense stored level iterates the other side
and locates into it: B's and C's references are repeated along A's l and T's k coordinates.
"""
import difflib
import os
import sys

import pytest

import fuseflow
from fuseflow.fusion.compile import compile_schedule

HERE = os.path.dirname(__file__)
GOLDEN = {
    "spmv": ("spmv.mlir", "full"),
    "spmm_ikj": ("spmm_ikj.mlir", "full"),
    "spmm_jik_inner": ("spmm_jik.mlir", "full order=j,i,k"),
    "spmm_jik": ("spmm_jik.mlir", "full"),
    "sddmm": ("sddmm.mlir", "full"),
    "matmul_chain": ("matmul_chain.mlir", "full"),
}


def render(name: str) -> str:
    path, schedule = GOLDEN[name]
    compiled = compile_schedule(fuseflow.from_mlir(os.path.join(HERE, "mlir", path)), schedule)
    parts = [f"# {path} with schedule: {compiled.schedule}"]
    for kernel in compiled.kernels:
        parts += [f"## kernel {kernel.index}: order {','.join(kernel.order)}", kernel.table.dump(),
                  kernel.graph.to_text()]
    return "\n".join(parts) + "\n"


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_graph(name):
    path = os.path.join(HERE, "golden", f"{name}.txt")
    with open(path) as handle:
        expected = handle.read()
    actual = render(name)
    diff = "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(), "golden", "now",
                                          lineterm=""))
    assert actual == expected, f"lowering of {name} changed:\n{diff}"


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(GOLDEN):
        with open(os.path.join(HERE, "golden", f"{name}.txt"), "w") as handle:
            handle.write(render(name))
        print("wrote", name)
