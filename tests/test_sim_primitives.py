"""The oracle simulator: every primitive on token vectors, storage round trips, and a hand-checked
SpMV graph (values, counters and cycles)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fuseflow.errors import UserError
from fuseflow.ir.formats import TensorFormat
from fuseflow.sam.graph import SamGraph, Stream
from fuseflow.sam.primitives import PRIMITIVES
from fuseflow.sim import oracle as o
from fuseflow.sim.hw import HwConfig
from fuseflow.sim.oracle import MisalignedStreams, run_graph
from fuseflow.sim.storage import StoredTensor, WrittenTensor
from fuseflow.sim.tokens import Done, Empty, Repeat, Stop, Val, format_tokens, parse_tokens

F = format_tokens


def F2(pair):
    return tuple(F(t) for t in pair)


# -- tokens ----------------------------------------------------------------------------------------
def test_tokens_parse_and_format():
    toks = parse_tokens("0 7 -2 0.5 3.0 S0 S12 N R D")
    assert toks == [Val(0), Val(7), Val(-2), Val(0.5), Val(3), Stop(0), Stop(12), Empty, Repeat, Done]
    assert F(toks) == "0 7 -2 0.5 3 S0 S12 N R D"
    assert F([Val(1e-7), Val(float("inf")), Val(2.25), Val(1e20)]) == "1e-07 inf 2.25 1e+20"
    assert isinstance(parse_tokens("3")[0].x, int) and isinstance(parse_tokens("3.5")[0].x, float)
    with pytest.raises(ValueError):
        parse_tokens("1 x D")


# -- docstring examples of primitives.py -------------------------------------------------------------
def test_root():
    assert F(o.root()) == "0 D"


def test_scan_doc_example():
    crd, ref = o.scan("0 1 S0 D", seg=[0, 2, 3], crd=[5, 7, 6])
    assert F(crd) == "5 7 S0 6 S0 S1 D"
    assert F(ref) == "0 1 S0 2 S0 S1 D"


def test_locate_doc_example():
    assert F(o.locate("1 3 S0 D", "2 2 S0 D", dim=4)) == "9 11 S0 D"
    assert F(o.locate("1 N S0 D", "N 2 S0 D", dim=4)) == "N N S0 D"


def test_repsig_doc_example():
    assert F(o.repsig("4 9 S0 S1 D")) == "R R S0 S1 D"


def test_repeat_doc_example():  # a=10, b=20
    assert F(o.repeat("10 20 S0 D", "R R S0 R S0 S1 D")) == "10 10 S0 20 S0 S1 D"


def test_intersect_doc_example():  # a b c d = 10 11 12 13
    crd, (p0, p1) = o.intersect(("1 3 S0 D", "10 11 S0 D"), ("3 4 S0 D", "12 13 S0 D"))
    assert (F(crd), F(p0), F(p1)) == ("3 S0 D", "11 S0 D", "12 S0 D")


def test_union_doc_example():
    crd, (p0, p1) = o.union(("1 3 S0 D", "10 11 S0 D"), ("3 4 S0 D", "12 13 S0 D"))
    assert (F(crd), F(p0), F(p1)) == ("1 3 4 S0 D", "10 11 N S0 D", "N 12 13 S0 D")


def test_array_semantics():
    assert F(o.array("2 0 N S0 S1 D", [1.5, 2.0, -3.0])) == "-3 1.5 0 S0 S1 D"


def test_alu_doc_example():
    assert F(o.alu("mul", "1 3 S0 D", scalar=2)) == "2 6 S0 D"


def test_reduce_doc_example():
    assert F(o.reduce("1 2 S0 S0 4 S0 S1 D")) == "3 0 4 S0 D"


def test_spacc_doc_example():
    assert F2(o.spacc("0 1 S0 D", "2 5 S0 5 S0 S1 D", "1 1 S0 2 S0 S1 D")) == ("2 5 S0 D", "1 3 S0 D")


def test_crd_drop_doc_example():
    assert F2(o.crd_drop("0 1 2 S0 D", "5 S0 S0 6 S0 S1 D")) == ("0 2 S0 D", "5 S0 6 S0 S1 D")


def test_every_primitive_has_an_implementation():
    assert set(o.IMPLS) == set(PRIMITIVES)


# -- edge cases --------------------------------------------------------------------------------------
def test_scan_empty_fibers_inner_and_outer():
    # fiber 1 is empty; N is an empty fiber; an empty outer fiber (S0 right after S1) becomes S1 S2
    crd, ref = o.scan("0 1 2 S0 N S0 S0 S1 D", seg=[0, 1, 1, 3], crd=[4, 0, 2])
    assert F(crd) == "4 S0 S0 0 2 S0 S1 S0 S1 S1 S2 D"
    assert F(ref) == "0 S0 S0 1 2 S0 S1 S0 S1 S1 S2 D"
    # a completely empty input fiber
    assert F(o.scan("S0 D", seg=[0, 0], crd=[])[0]) == "S1 D"


def test_scan_dense():
    crd, ref = o.scan("0 2 S0 N S0 S1 D", dim=3)
    # a missing parent (N) still has every coordinate of a dense level, with no data (N positions)
    assert F(crd) == "0 1 2 S0 0 1 2 S0 S1 0 1 2 S0 S1 S2 D"
    assert F(ref) == "0 1 2 S0 6 7 8 S0 S1 N N N S0 S1 S2 D"


def test_empty_tokens_through_array_alu_reduce():
    assert F(o.array("N 1 S0 D", [5.0, 6.0])) == "0 6 S0 D"
    assert F(o.alu("add", "N 1 N S0 D", "2 N N S0 D")) == "2 1 0 S0 D"
    assert F(o.alu("exp", "N S0 D")) == "1 S0 D"
    assert F(o.reduce("N N S0 N 2 S0 S1 D")) == "0 2 S0 D"
    assert F(o.reduce("-3 N S0 D", "max")) == "0 D"  # N counts as 0


def test_max_min_reduce_of_negative_data():
    assert F(o.reduce("-3 -1 S0 -5 S0 S0 S1 D", "max")) == "-1 -5 -inf S0 D"
    assert F(o.reduce("3 1 S0 5 S0 S0 S1 D", "min")) == "1 5 inf S0 D"


def test_reduce_outer_levels():
    assert F(o.reduce("1 S0 2 S0 S1 S1 S2 D")) == "1 2 S0 S0 S1 D"


def _pay(crd_text: str, base: int) -> str:
    """A payload aligned with `crd_text`: coordinate c -> base + c."""
    return " ".join(str(base + int(w)) if w[0].isdigit() else w for w in crd_text.split())


THREE = ["1 2 4 6 S0 3 S0 S0 S1 D", "2 4 5 6 S0 S0 1 S0 S1 D", "0 2 6 S0 1 3 S0 S0 S1 D"]


def test_intersect_three_inputs():
    crd, pays = o.intersect(*[(c, _pay(c, 100 * i)) for i, c in enumerate(THREE)])
    assert F(crd) == "2 6 S0 S0 S0 S1 D"
    assert [F(p) for p in pays] == ["2 6 S0 S0 S0 S1 D", "102 106 S0 S0 S0 S1 D", "202 206 S0 S0 S0 S1 D"]


def test_union_three_inputs():
    crd, pays = o.union(*[(c, _pay(c, 100 * i)) for i, c in enumerate(THREE)])
    assert F(crd) == "0 1 2 4 5 6 S0 1 3 S0 1 S0 S1 D"
    assert [F(p) for p in pays] == ["N 1 2 4 N 6 S0 N 3 S0 N S0 S1 D",
                                    "N N 102 104 105 106 S0 N N S0 101 S0 S1 D",
                                    "200 N 202 N N 206 S0 201 203 S0 N S0 S1 D"]


def test_joiners_on_empty_outer_fibers():
    crd, pays = o.intersect(("S1 D", "S1 D"), ("S1 D", "S1 D"))
    assert F(crd) == "S1 D" and [F(p) for p in pays] == ["S1 D", "S1 D"]
    crd, pays = o.union(("S0 1 S0 S1 D", "S0 7 S0 S1 D"), ("S0 S0 S1 D", "S0 S0 S1 D"))
    assert F(crd) == "S0 1 S0 S1 D" and [F(p) for p in pays] == ["S0 7 S0 S1 D", "S0 N S0 S1 D"]


def test_intersect_skip_steps():
    # heads (1, 3): skip 1; (3, 3): match; (S0, 4): skip 4; (S0, S0): stop; (D, D): done -> 5 steps
    run = o.apply("intersect", {"crd0": "1 3 S0 D", "pay0": "1 3 S0 D", "crd1": "3 4 S0 D",
                                "pay1": "3 4 S0 D"}, arity=2)
    assert run.steps == 5


def test_spacc_repeated_coordinates_two_outer_levels():
    outer, inner = "0 1 S0 2 S0 S1 D", "1 3 S0 1 2 S0 S1 S0 S1 S2 D"
    assert F2(o.spacc(outer, inner, "1 2 S0 3 4 S0 S1 S0 S1 S2 D")) == ("1 2 3 S0 S0 S1 D", "4 4 2 S0 S0 S1 D")
    assert F2(o.spacc(outer, inner, "-1 -2 S0 -3 -4 S0 S1 S0 S1 S2 D", "max")) == \
        ("1 2 3 S0 S0 S1 D", "-1 -4 -2 S0 S0 S1 D")
    # unsorted inner fibers and N values
    assert F2(o.spacc("0 1 S0 D", "5 2 S0 2 S0 S1 D", "1 N S0 4 S0 S1 D")) == ("2 5 S0 D", "4 1 S0 D")


def test_spacc_steps():
    # 3 pairs + 2 outer coordinates + 2 entries + S0 + D
    run = o.apply("spacc", {"crd_outer": "0 1 S0 D", "crd_inner": "2 5 S0 5 S0 S1 D",
                            "val": "1 1 S0 2 S0 S1 D"})
    assert run.steps == 3 + 2 + 2 + 2


def test_crd_drop_chain():
    i, j, k = "0 1 S0 D", "0 1 S0 0 S0 S1 D", "5 S0 S0 S1 S0 S1 S2 D"
    j1, k1 = o.crd_drop(j, k)
    assert (F(j1), F(k1)) == ("0 S0 S0 S1 D", "5 S0 S1 S1 S2 D")
    i2, j2 = o.crd_drop(i, j1)
    assert (F(i2), F(j2)) == ("0 S0 D", "0 S0 S1 D")
    # nothing to drop: identity
    assert F2(o.crd_drop("0 1 S0 D", "3 S0 4 S0 S1 D")) == ("0 1 S0 D", "3 S0 4 S0 S1 D")
    # everything dropped
    assert F2(o.crd_drop("0 1 S0 D", "S0 S0 S1 D")) == ("S0 D", "S1 D")


def test_alu_ops_match_numpy():
    from scipy.special import erf
    xs = [-2.0, -0.0, 0.0, 0.5, 3.0, 800.0, float("nan")]
    unary = {"neg": np.negative, "exp": np.exp, "sqrt": np.sqrt, "rsqrt": lambda a: 1 / np.sqrt(a),
             "tanh": np.tanh, "erf": erf, "abs": np.abs}
    binary = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "max": np.maximum, "min": np.minimum, "gt": np.greater, "ge": np.greater_equal,
              "lt": np.less, "le": np.less_equal, "eq": np.equal, "ne": np.not_equal}
    text = " ".join(map(str, xs)) + " S0 D"
    with np.errstate(all="ignore"):
        for op, fn in unary.items():
            got = [t.x for t in o.alu(op, text)[:-2]]
            np.testing.assert_allclose(got, fn(np.array(xs)), rtol=1e-15, err_msg=op)
        pairs = list(itertools.product(xs, xs))
        a = " ".join(str(p[0]) for p in pairs) + " S0 D"
        b = " ".join(str(p[1]) for p in pairs) + " S0 D"
        for op, fn in binary.items():
            got = [t.x for t in o.alu(op, a, b)[:-2]]
            want = fn(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])).astype(float)
            np.testing.assert_array_equal(got, want, err_msg=op)


def test_alu_scalar_select_const():
    assert F(o.alu("sub", "1 3 S0 D", scalar=10, scalar_pos=0)) == "9 7 S0 D"
    assert F(o.alu("sub", "1 3 S0 D", scalar=10, scalar_pos=1)) == "-9 -7 S0 D"
    assert F(o.alu("div", "1 0 S0 D", scalar=0, scalar_pos=0)) == "0 nan S0 D"
    assert F(o.alu("select", "1 0 N S0 D", "2 3 4 S0 D", "5 6 7 S0 D")) == "2 6 7 S0 D"
    assert F(o.alu("const", "1 N S0 S0 S1 D", scalar=0.5)) == "0.5 0.5 S0 S0 S1 D"
    assert F(o.alu("gt", "1 3 S0 D", scalar=2)) == "0 1 S0 D"


def test_alu_bad_signature_is_a_graph_error():
    with pytest.raises(AssertionError, match="takes 2 operands"):
        o.alu("add", "1 S0 D")


def test_broadcast_fork_join():
    assert [F(t) for t in o.broadcast("1 S0 D", 2)] == ["1 S0 D", "1 S0 D"]
    stream = "1 2 3 S0 N S0 S0 4 5 S0 S1 D"
    lanes = o.fork(stream, 3)
    assert [F(t) for t in lanes] == ["1 S0 N S0 S0 S0 S1 D", "2 S0 S0 S0 4 S0 S1 D", "3 S0 S0 S0 5 S0 S1 D"]
    assert F(o.join(lanes)) == stream
    rng = np.random.default_rng(1)
    for _ in range(50):
        toks = []
        for _fiber in range(rng.integers(0, 4)):
            toks += [Val(int(v)) for v in rng.integers(0, 9, rng.integers(0, 6))] + [Stop(0)]
        toks += [Stop(1), Done]
        for k in (1, 2, 3, 4):
            assert o.join(o.fork(toks, k)) == toks


def test_join_depth_one():
    # fork refs over 2 lanes, scan each lane (elements grow one level), join with depth=1
    refs = "0 1 2 S0 D"
    seg, crd = [0, 2, 2, 3], [4, 5, 6]
    lanes = [o.scan(lane, seg=seg, crd=crd)[0] for lane in o.fork(refs, 2)]
    assert F(o.join(lanes, depth=1)) == F(o.scan(refs, seg=seg, crd=crd)[0]) == "4 5 S0 S0 6 S0 S1 D"


def test_level_and_value_writers():
    lv = o.level_write("1 3 S0 S0 2 S0 S1 D", format="compressed", dim=4)
    assert (lv.seg.tolist(), lv.crd.tolist()) == ([0, 2, 2, 3], [1, 3, 2])
    assert o.level_write("0 1 S0 0 1 S0 S1 D", format="dense", dim=2).dim == 2
    with pytest.raises(MisalignedStreams, match="dense level"):
        o.level_write("0 S0 D", format="dense", dim=2)
    with pytest.raises(MisalignedStreams, match="dense level"):
        o.level_write("1 0 S0 D", format="dense", dim=2)
    assert o.value_write("1 N S0 2.5 S0 S1 D") == [1.0, 0.0, 2.5]


def test_misaligned_inputs_raise_naming_tokens():
    with pytest.raises(MisalignedStreams, match="alu.*not aligned: 2 vs S0"):
        o.alu("add", "1 2 S0 D", "1 S0 D")
    with pytest.raises(MisalignedStreams, match="intersect.*S0 vs S1"):
        o.intersect(("S0 S1 D", "S0 S1 D"), ("S1 D", "S1 D"))
    with pytest.raises(MisalignedStreams, match="repeat"):
        o.repeat("1 S0 D", "R S1 D")
    with pytest.raises(MisalignedStreams, match="ended without D"):
        o.reduce("1 S0")
    with pytest.raises(MisalignedStreams, match="after its D"):
        o.alu("neg", "1 S0 D 2")


def test_misaligned_graph_names_the_node():
    g = SamGraph("bad")
    r = g.add("root")
    s1 = g.add("scan", {"tensor": "A", "level": 0, "format": "dense", "dim": 2}, ref=r.out("ref"))
    s2 = g.add("scan", {"tensor": "A", "level": 1, "format": "dense", "dim": 2}, ref=s1.out("ref"))
    a1 = g.add("array", {"tensor": "A"}, ref=s1.out("ref"))
    a2 = g.add("array", {"tensor": "A"}, ref=s2.out("ref"))
    bad = g.add("alu", {"op": "add", "arity": 2}, a=a1.out("val"), b=a2.out("val"))
    A = StoredTensor.from_dense(np.ones((2, 2)), TensorFormat.dense(2))
    with pytest.raises(MisalignedStreams, match=f"n{bad.id} alu"):
        run_graph(g, {"A": A})


# -- storage ---------------------------------------------------------------------------------------
def _random_array(rng, shape):
    a = np.where(rng.random(shape) < 0.4, rng.integers(1, 9, shape).astype(float), 0.0)
    if a.ndim >= 1 and shape[0] > 1:
        a[1] = 0.0  # an empty row (slice)
    if a.ndim >= 2:
        a[:, -1] = 0.0
    return a


FORMATS = [(rank, levels, order) for rank in (1, 2, 3)
           for levels in itertools.product(("dense", "compressed"), repeat=rank)
           for order in itertools.permutations(range(rank))]


@pytest.mark.parametrize("rank,levels,order", FORMATS)
def test_storage_round_trip(rank, levels, order):
    rng = np.random.default_rng(hash((levels, order)) % 2**32)
    fmt = TensorFormat.parse(",".join(levels) + ";order=" + ",".join(map(str, order)))
    for shape in [(3, 4, 2)[:rank], (1, 5, 3)[:rank], (4, 1, 1)[:rank]]:
        for a in (_random_array(rng, shape), np.zeros(shape)):
            t = StoredTensor.from_dense(a, fmt)
            assert np.array_equal(t.to_dense(), a)
            assert np.array_equal(t.to_dense(shape), a)
            n_pos = 1
            for k, lv in enumerate(t.levels):
                assert lv.dim == shape[order[k]]
                if lv.is_compressed:
                    assert len(lv.seg) == n_pos + 1 and lv.seg[-1] == len(lv.crd)
                    n_pos = len(lv.crd)
                else:
                    n_pos *= lv.dim
            assert len(t.vals) == n_pos
            w = WrittenTensor(dict(enumerate(t.levels)), t.vals)
            assert np.array_equal(w.to_dense(shape, order), a)


def test_storage_layout_and_scalars():
    A = np.array([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 3.0]])
    t = StoredTensor.from_dense(A, TensorFormat.parse("compressed,dense"))
    assert t.levels[0].crd.tolist() == [0, 2] and t.vals.tolist() == [0.0, 2.0, 0.0, 1.0, 0.0, 3.0]
    t = StoredTensor.from_dense(A, TensorFormat.parse("dense,compressed"))
    assert t.levels[1].seg.tolist() == [0, 1, 1, 3] and t.levels[1].crd.tolist() == [1, 0, 2]
    s = StoredTensor.from_dense(np.array(4.0), TensorFormat((), ()))
    assert s.vals.tolist() == [4.0] and float(s.to_dense()) == 4.0
    b = StoredTensor.from_dense(A, TensorFormat.parse("dense,dense;block=1x1"))  # 1x1 blocks: the scalars
    assert b.vals.reshape(-1).tolist() == A.reshape(-1).tolist() and (b.to_dense() == A).all()
    with pytest.raises(UserError, match="does not divide"):
        StoredTensor.from_dense(A, TensorFormat.parse("dense,dense;block=2x2"))


# -- graphs ----------------------------------------------------------------------------------------
def spmv_graph(n: int, m: int) -> SamGraph:
    """y[i] = sum_j A[i,j] * x[j], A dense,compressed (CSR), x dense, y dense."""
    g = SamGraph("spmv")
    r = g.add("root")                                                                    # n0
    si = g.add("scan", {"tensor": "A", "level": 0, "format": "dense", "dim": n}, ref=r.out("ref"))  # n1
    sj = g.add("scan", {"tensor": "A", "level": 1, "format": "compressed", "dim": m},
               ref=si.out("ref"))                                                        # n2
    rs = g.add("repsig", crd=si.out("crd"))                                              # n3
    rx = g.add("root")                                                                   # n4
    xi = g.add("repeat", **{"in": rx.out("ref"), "sig": rs.out("repsig")})               # n5
    sx = g.add("scan", {"tensor": "x", "level": 0, "format": "dense", "dim": m}, ref=xi.out("out"))  # n6
    ij = g.add("intersect", arity=2, crd0=sj.out("crd"), pay0=sj.out("ref"),
               crd1=sx.out("crd"), pay1=sx.out("ref"))                                   # n7
    va = g.add("array", {"tensor": "A"}, ref=ij.out("pay0"))                             # n8
    vx = g.add("array", {"tensor": "x"}, ref=ij.out("pay1"))                             # n9
    mul = g.add("alu", {"op": "mul", "arity": 2, "scalar": None, "scalar_pos": 1},
                a=va.out("val"), b=vx.out("val"))                                        # n10
    red = g.add("reduce", {"kind": "sum"}, val=mul.out("val"))                           # n11
    g.add("level_write", {"tensor": "y", "level": 0, "format": "dense", "dim": n}, crd=si.out("crd"))  # n12
    g.add("value_write", {"tensor": "y"}, val=red.out("val"))                            # n13
    g.verify()
    return g


def test_spmv_2x2_values_counters_and_cycles():
    A = np.array([[1.0, 0.0], [2.0, 3.0]])
    x = np.array([5.0, 7.0])
    tensors = {"A": StoredTensor.from_dense(A, TensorFormat.parse("dense,compressed")),
               "x": StoredTensor.from_dense(x, TensorFormat.dense(1))}
    run = run_graph(spmv_graph(2, 2), tensors, keep_streams=True)
    y = run.written["y"].to_dense((2,))
    assert y.tolist() == (A @ x).tolist() == [5.0, 31.0]

    def stream(node, port):
        return F(run.streams[Stream(node, port)]), run.stream_times[Stream(node, port)]

    # Hand derivation (latency 1, II 1; "v@t" = token v visible at time t; a step at time t emits
    # tokens visible at t+1; t_s = max(t_{s-1}+1, visible time of every token the step reads)):
    # n0 root: steps 0,1 -> 0@1 D@2                      n4 root (x): same
    # n1 scan A.0 dense: step 1 reads 0@1 -> i=0; steps 2 (i=1), 3 (S0), 4 reads D@2
    #    -> crd 0@2 1@3 S0@4 D@5
    assert stream(1, "crd") == ("0 1 S0 D", [2, 3, 4, 5])
    # n2 scan A.1 compressed (row0 {0}, row1 {0,1}): step 2 reads ref 0@2 -> 0; 3: S0;
    #    4 reads ref 1@3 -> 0; 5: 1; 6: S0; 7 reads S0@4 -> S1; 8 reads D@5 -> D
    assert stream(2, "crd") == ("0 S0 0 1 S0 S1 D", [3, 4, 5, 6, 7, 8, 9])
    # n3 repsig: one step per crd_i token at 2,3,4,5 -> R@3 R@4 S0@5 D@6
    # n5 repeat: one step per signal, reading in's head (0@1, D@2): 3,4,5,6 -> 0@4 0@5 S0@6 D@7
    assert stream(5, "out") == ("0 0 S0 D", [4, 5, 6, 7])
    # n6 scan x dense: 4 (reads 0@4) 5 6(S0) 7 (reads 0@5) 8 9(S0) 10 (S0@6 -> S1) 11 (D@7)
    assert stream(6, "crd") == ("0 1 S0 0 1 S0 S1 D", [5, 6, 7, 8, 9, 10, 11, 12])
    # n7 intersect, heads (A.1 crd, x crd): (0@3,0@5) match at 5; (S0@4,1@6) skip x at 6;
    #    (S0,S0@7) stop at 7; (0@5,0@8) at 8; (1@6,1@9) at 9; S0 at 10; S1 at 11; D at 12
    assert stream(7, "crd") == ("0 S0 0 1 S0 S1 D", [6, 8, 9, 10, 11, 12, 13])
    # n8/n9 arrays and n10 mul: one step per token, each +1 -> mul out 5@8 S0@10 10@11 21@12 S0@13 S1@14 D@15
    assert stream(10, "val") == ("5 S0 10 21 S0 S1 D", [8, 10, 11, 12, 13, 14, 15])
    # n11 reduce: steps at 8,10,11,12,13,14,15; S0 at 10 -> 5@11, S0 at 13 -> 31@14, S1 -> S0@15, D@16
    assert stream(11, "val") == ("5 31 S0 D", [11, 14, 15, 16])
    # n12 level_write y.0 consumes D@5 at step time 5; n13 value_write consumes D@16 at time 16
    assert run.cycles == 16

    assert run.node_steps == {0: 2, 1: 4, 2: 7, 3: 4, 4: 2, 5: 4, 6: 8, 7: 8, 8: 7, 9: 7, 10: 7,
                              11: 7, 12: 4, 13: 4}
    # flops: 3 products + 3 accumulations; reads: A.1 seg 2*2 + crd 3, A vals 3, x vals 3;
    # writes: y values 2 (y.0 is dense: nothing stored)
    assert run.counters == {"flops": 6, "mem_reads": 13, "mem_writes": 2}
    assert run.stream_tokens[Stream(7, "crd")] == 7


@pytest.mark.parametrize("seed", range(5))
def test_spmv_random(seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(1, 8, 2)
    A = _random_array(rng, (n, m))
    x = rng.standard_normal(m)
    tensors = {"A": StoredTensor.from_dense(A, TensorFormat.parse("dense,compressed")),
               "x": StoredTensor.from_dense(x, TensorFormat.dense(1))}
    run = run_graph(spmv_graph(n, m), tensors)
    np.testing.assert_allclose(run.written["y"].to_dense((n,)), A @ x, rtol=1e-12)
    assert run.streams is None


def _chain(latency=None, ii=1):
    g = SamGraph("chain")
    r = g.add("root")
    s = g.add("scan", {"tensor": "B", "level": 0, "format": "compressed", "dim": 4}, ref=r.out("ref"))
    g.add("level_write", {"tensor": "z", "level": 0, "format": "compressed", "dim": 4}, crd=s.out("crd"))
    B = StoredTensor.from_dense(np.array([0.0, 1.0, 0.0, 2.0]), TensorFormat.parse("compressed"))
    hw = HwConfig(latency=latency or {}, initiation_interval=ii)
    return run_graph(g, {"B": B}, hw, keep_streams=True)


def test_timing_root_scan_chain():
    # root steps at 0,1 -> 0@1 D@2. scan: step 1 reads 0@1 emits crd 1; step 2 emits 3; step 3
    # emits S0; step 4 reads D@2 (visible long before) emits D. +1 latency -> 2,3,4,5.
    run = _chain()
    assert run.stream_times[Stream(0, "ref")] == [1, 2]
    assert F(run.streams[Stream(1, "crd")]) == "1 3 S0 D"
    assert run.stream_times[Stream(1, "crd")] == [2, 3, 4, 5]
    assert run.cycles == 5  # the writer steps at 2,3,4,5
    assert run.written["z"].levels[0].crd.tolist() == [1, 3]


def test_timing_latency_and_initiation_interval():
    # II=2: root steps 0,2 -> 0@1 D@3. scan (latency 3): steps 1, 3, 5, max(7, 3)=7 -> 4,6,8,10.
    # writer: steps at 4, 6, 8, 10.
    run = _chain({"scan": 3}, ii=2)
    assert run.stream_times[Stream(0, "ref")] == [1, 3]
    assert run.stream_times[Stream(1, "crd")] == [4, 6, 8, 10]
    assert run.cycles == 10


def test_timed_apply_waits_for_inputs():
    # repeat's R steps peek at in's head: they wait until it is visible
    run = o.apply("repeat", {"in": ("7 D", [5, 6]), "sig": ("R R S0 D", [0, 0, 0, 0])})
    assert F(run.outs["out"]) == "7 7 S0 D" and run.times["out"] == [6, 7, 8, 9]


def test_fork_join_in_a_graph():
    g = SamGraph("lanes")
    r = g.add("root")
    s = g.add("scan", {"tensor": "v", "level": 0, "format": "compressed", "dim": 6}, ref=r.out("ref"))
    f = g.add("fork", {"lanes": 2}, arity=2, **{"in": s.out("ref")})
    lanes = [g.add("array", {"tensor": "v"}, ref=f.out(f"out{k}"), cse=False) for k in range(2)]
    lanes = [g.add("alu", {"op": "mul", "arity": 1, "scalar": 2.0, "scalar_pos": 1}, a=a.out("val"),
                   cse=False) for a in lanes]
    j = g.add("join", {"lanes": 2}, arity=2, in0=lanes[0].out("val"), in1=lanes[1].out("val"))
    g.add("level_write", {"tensor": "w", "level": 0, "format": "compressed", "dim": 6}, crd=s.out("crd"))
    g.add("value_write", {"tensor": "w"}, val=j.out("out"))
    g.verify()
    v = np.array([0.0, 1.0, 2.0, 0.0, 3.0, 4.0])
    run = run_graph(g, {"v": StoredTensor.from_dense(v, TensorFormat.parse("compressed"))})
    assert run.written["w"].to_dense((6,)).tolist() == (2 * v).tolist()
    assert run.counters["flops"] == 4 and math.isfinite(run.cycles)


def test_missing_tensor_is_a_user_error():
    with pytest.raises(UserError, match="no stored tensor 'A'"):
        run_graph(spmv_graph(2, 2), {})
