"""The fast engine equals the oracle: per primitive on random well-formed (and malformed) timed
token streams, and on every graph the lowering test cases produce."""
from __future__ import annotations

import math
import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow.execute import execute
from fuseflow.fusion.compile import compile_schedule
from fuseflow.sim import fast, oracle
from fuseflow.sim.hw import MEMORY_KINDS, HwConfig
from fuseflow.sim.storage import Level, StoredTensor
from fuseflow.sim.tokens import Done, Empty, Repeat, Stop, Val

from lowering_cases import MLIR_FILES, load, order_variants, schedules

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- exact comparison ------------------------------------------------------------------------------
def _bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def same_token(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, Val):
        if type(a.x) is not type(b.x):
            return False
        return _bits(a.x) == _bits(b.x) if isinstance(a.x, float) else a.x == b.x
    return a == b if isinstance(a, Stop) else a is b


def assert_same_tokens(got, want, where=""):
    assert len(got) == len(want), f"{where}: {len(got)} vs {len(want)} tokens\n{got}\n{want}"
    for i, (a, b) in enumerate(zip(got, want)):
        assert same_token(a, b), f"{where}: token {i}: {a!r} vs {b!r}\n{got}\n{want}"


def assert_same_floats(got, want, where=""):
    assert got is not None and want is not None or got is want, where
    if got is not None:
        assert [_bits(float(x)) for x in got] == [_bits(float(x)) for x in want], f"{where}: {got} vs {want}"
        # the fast engine writes a float64 array, the oracle a list of floats
        assert (got.dtype == np.float64 and got.ndim == 1) if isinstance(got, np.ndarray) else \
            all(type(x) is float for x in got), where


def same_level(a, b) -> bool:
    if a is None or b is None:
        return a is b
    lists = [None if x is None else [int(v) for v in x] for x in (a.seg, a.crd, b.seg, b.crd)]
    return (a.format, a.dim, lists[0], lists[1]) == (b.format, b.dim, lists[2], lists[3])


def assert_same_node_run(got: oracle.NodeRun, want: oracle.NodeRun):
    assert got.outs.keys() == want.outs.keys()
    for port in want.outs:
        assert_same_tokens(got.outs[port], want.outs[port], port)
        assert got.times[port] == want.times[port], port
    assert (got.steps, got.last_step, got.counters) == (want.steps, want.last_step, want.counters)
    assert same_level(got.written_level, want.written_level), (got.written_level, want.written_level)
    if want.written_vals is not None or got.written_vals is not None:
        assert_same_floats(got.written_vals, want.written_vals, "written vals")
    assert got.consumed == want.consumed


# buffer sizes the streaming engine must be exact at: one token, small primes, the whole stream
APPLY_CHUNKS = (1, 2, 3, None)


def check_apply(kind, inputs, params=None, tensors=None, arity=0, hw=None, chunks=APPLY_CHUNKS):
    """Run one primitive on both engines, fed in chunks of each size: same NodeRun, or the same
    exception."""
    try:
        want = oracle.apply(kind, inputs, params, tensors=tensors, arity=arity, hw=hw)
    except Exception as err:  # noqa: BLE001 - the fast engine must raise the very same
        for chunk in chunks:
            with pytest.raises(type(err)) as info:
                fast.apply(kind, inputs, params, tensors=tensors, arity=arity, hw=hw, chunk=chunk)
            assert str(info.value) == str(err)
        return None
    for chunk in chunks:
        got = fast.apply(kind, inputs, params, tensors=tensors, arity=arity, hw=hw, chunk=chunk)
        assert_same_node_run(got, want)
    return want


# -- stream generators -----------------------------------------------------------------------------
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e308, -1e308, 710.0, -750.0, 1e-310,
           math.inf, -math.inf, math.nan]
floats = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True, width=64),
                   st.integers(-8, 8).map(float))


def flatten(fiber, level):
    """Tokens of a level-`level` fiber given as nested lists (elements at level 0)."""
    if level == 0:
        return list(fiber) + [Stop(0)]
    out = []
    for child in fiber:
        out += flatten(child, level - 1)
    return out + [Stop(level)]


def skeleton(draw, depth, max_children=3, max_elems=4):
    """Nested lists of element *counts*' placeholders: a level-(depth-1) fiber, or one element."""
    if depth == 0:
        return None

    def fiber(level):
        if level == 0:
            return draw(st.integers(0, max_elems))
        return [fiber(level - 1) for _ in range(draw(st.integers(0, max_children)))]

    return fiber(depth - 1)


def fill(skel, depth, elems):
    """Tokens of a stream with structure `skel`; `elems(count)` gives the elements of a level-0 fiber."""
    if depth == 0:
        return elems(1) + [Done]

    def walk(node, level):
        if level == 0:
            return elems(node) + [Stop(0)]
        out = []
        for child in node:
            out += walk(child, level - 1)
        return out + [Stop(level)]

    return walk(skel, depth - 1) + [Done]


def elem_list(draw, value, empty_p=0.2):
    def make(count):
        return [Empty if draw(st.floats(0, 1)) < empty_p else Val(draw(value)) for _ in range(count)]
    return make


def grow(draw, toks, fiber):
    """Each element becomes a level-0 fiber `fiber()` (a list of tokens) closed by S0; Sn -> S(n+1)."""
    out = []
    for tok in toks:
        if isinstance(tok, Stop):
            out.append(Stop(tok.n + 1))
        elif tok is Done:
            out.append(Done)
        else:
            out += fiber(tok) + [Stop(0)]
    return out


def timed(draw, toks):
    t = draw(st.integers(0, 5))
    times = []
    for _ in toks:
        t += draw(st.integers(0, 3))
        times.append(t)
    return toks, times


def hw_for(draw, kind):
    hw = HwConfig(latency={kind: draw(st.integers(0, 3))}, initiation_interval=draw(st.integers(0, 2)))
    if kind in MEMORY_KINDS and draw(st.booleans()):  # the memory model
        hw.hbm, hw.hbm_channels = True, draw(st.integers(1, 4))
        hw.hbm_latency, hw.hbm_interval, hw.hbm_startup = draw(st.integers(0, 3)), 2, draw(st.integers(0, 5))
    return hw


def sorted_coords(draw, count, hi=8):
    return sorted(draw(st.sets(st.integers(0, hi - 1), min_size=count, max_size=count))) if count <= hi else []


# -- per-primitive differential tests ------------------------------------------------------------------
@settings(max_examples=30, **SETTINGS)
@given(st.data())
def test_scan(data):
    draw = data.draw
    compressed = draw(st.booleans())
    depth = draw(st.integers(0, 3))
    if compressed:
        n_parents = draw(st.integers(1, 5))
        sizes = draw(st.lists(st.integers(0, 4), min_size=n_parents, max_size=n_parents))
        seg = [0] + list(np.cumsum(sizes).tolist())
        crd = draw(st.lists(st.integers(0, 9), min_size=seg[-1], max_size=seg[-1]))
        level = Level("compressed", 10, seg, crd)
        params = {"tensor": "T", "level": 0, "format": "compressed", "dim": 10}
        refs = st.integers(0, n_parents - 1)
    else:
        dim = draw(st.integers(0, 4))
        level = Level("dense", dim)
        universe = draw(st.booleans())
        params = ({"format": "dense", "dim": dim} if universe else
                  {"tensor": "T", "level": 0, "format": "dense", "dim": dim})
        if draw(st.booleans()):  # a dense level visited out of its stored order
            params["stride"] = draw(st.integers(1, 7))
        refs = st.integers(0, 6)
    toks = fill(skeleton(draw, depth), depth, elem_list(draw, refs))
    check_apply("scan", {"ref": timed(draw, toks)}, params, tensors={"T": StoredTensor([level], [])},
                hw=hw_for(draw, "scan"))


def test_strided_dense_scan_and_locate_add_coordinate_times_stride():
    """A dense tensor read out of its stored level order: each level adds coordinate x stride."""
    run = check_apply("scan", {"ref": "2 S0 D"}, {"tensor": "T", "level": 0, "format": "dense", "dim": 3, "stride": 5},
                      tensors={"T": StoredTensor([Level("dense", 3)], [])})
    assert oracle.format_tokens(run.outs["ref"]) == "2 7 12 S0 S1 D"
    assert oracle.format_tokens(run.outs["crd"]) == "0 1 2 S0 S1 D"
    with pytest.raises(Exception, match="stride"):
        oracle.apply("scan", {"ref": "0 D"}, {"tensor": "T", "level": 0, "format": "compressed", "stride": 2},
                     tensors={"T": StoredTensor([Level("compressed", 3, [0, 1], [2])], [])})
    run = check_apply("locate", {"crd": "1 2 S0 D", "ref": "4 4 S0 D"}, {"dim": 3, "stride": 10})
    assert oracle.format_tokens(run.outs["ref"]) == "14 24 S0 D"


@settings(max_examples=20, **SETTINGS)
@given(st.data())
def test_repsig_and_broadcast(data):
    draw = data.draw
    depth = draw(st.integers(0, 3))
    toks = fill(skeleton(draw, depth), depth, elem_list(draw, st.integers(0, 9)))
    check_apply("repsig", {"crd": timed(draw, toks)}, hw=hw_for(draw, "repsig"))
    value = draw(st.sampled_from([st.integers(0, 9), floats]))
    toks = fill(skeleton(draw, depth), depth, elem_list(draw, value))
    k = draw(st.integers(1, 3))
    check_apply("broadcast", {"in": timed(draw, toks)}, arity=k, hw=hw_for(draw, "broadcast"))


@settings(max_examples=25, **SETTINGS)
@given(st.data())
def test_repeat(data):
    draw = data.draw
    depth = draw(st.integers(0, 3))
    value = draw(st.sampled_from([st.integers(0, 9), floats]))
    inp = fill(skeleton(draw, depth), depth, elem_list(draw, value))
    sig = grow(draw, inp, lambda tok: [Repeat] * draw(st.integers(0, 3)))
    check_apply("repeat", {"in": timed(draw, inp), "sig": timed(draw, sig)}, hw=hw_for(draw, "repeat"))


@settings(max_examples=40, **SETTINGS)
@given(st.data())
def test_intersect_union(data):
    draw = data.draw
    kind = draw(st.sampled_from(["intersect", "union"]))
    k = draw(st.integers(2, 4))
    depth = draw(st.integers(1, 3))
    skel = skeleton(draw, depth, max_elems=5)
    inputs = {}
    for i in range(k):
        crd = fill(skel, depth, lambda count: [Val(c) for c in sorted_coords(draw, count)])
        value = draw(st.sampled_from([st.integers(0, 99), floats]))
        pay = [(Empty if draw(st.floats(0, 1)) < 0.2 else Val(draw(value))) if isinstance(t, Val) else t
               for t in crd]
        inputs[f"crd{i}"], inputs[f"pay{i}"] = timed(draw, crd), timed(draw, pay)
    check_apply(kind, inputs, arity=k, hw=hw_for(draw, kind))


@settings(max_examples=15, **SETTINGS)
@given(st.data())
def test_array_and_locate(data):
    draw = data.draw
    depth = draw(st.integers(0, 3))
    vals = draw(st.lists(floats, min_size=1, max_size=6))
    refs = fill(skeleton(draw, depth), depth, elem_list(draw, st.integers(0, len(vals) - 1)))
    tensor = StoredTensor([], vals)
    params = {"tensor": "T"}
    if draw(st.booleans()):  # a background other than 0, from the tensor or the node
        if draw(st.booleans()):
            tensor.fill = draw(floats)
        else:
            params["fill"] = draw(floats)
    check_apply("array", {"ref": timed(draw, refs)}, params, tensors={"T": tensor}, hw=hw_for(draw, "array"))
    dim = draw(st.integers(1, 5))
    skel = skeleton(draw, depth)
    crd = fill(skel, depth, elem_list(draw, st.integers(0, dim - 1)))
    ref = fill(skel, depth, elem_list(draw, st.integers(0, 9)))
    params = {"dim": dim}
    if draw(st.booleans()):  # a level located out of its stored order
        params["stride"] = draw(st.integers(1, 7))
    check_apply("locate", {"crd": timed(draw, crd), "ref": timed(draw, ref)}, params,
                hw=hw_for(draw, "locate"))


ALU_CASES = ([(op, 1, False) for op in ("neg", "exp", "sqrt", "rsqrt", "tanh", "erf", "abs")]
             + [(op, n, s) for op in ("add", "sub", "mul", "div", "max", "min", "gt", "ge", "lt", "le", "eq", "ne")
                for n, s in ((2, False), (1, True))]
             + [("select", 3, False), ("select", 2, True), ("const", 1, True), ("coalesce", 1, True)])


@settings(max_examples=40, **SETTINGS)
@given(st.data())
def test_alu(data):
    draw = data.draw
    op, arity, has_scalar = draw(st.sampled_from(ALU_CASES))
    depth = draw(st.integers(0, 3))
    skel = skeleton(draw, depth)
    inputs = {p: timed(draw, fill(skel, depth, elem_list(draw, floats))) for p in "abc"[:arity]}
    params = {"op": op, "arity": arity}
    if has_scalar:
        params["scalar"] = draw(floats)
        params["scalar_pos"] = draw(st.integers(0, arity))
    check_apply("alu", inputs, params, hw=hw_for(draw, "alu"))


@settings(max_examples=20, **SETTINGS)
@given(st.data())
def test_reduce(data):
    draw = data.draw
    depth = draw(st.integers(1, 3))
    toks = fill(skeleton(draw, depth), depth, elem_list(draw, floats))
    check_apply("reduce", {"val": timed(draw, toks)}, {"kind": draw(st.sampled_from(["sum", "max", "min"]))},
                hw=hw_for(draw, "reduce"))


@settings(max_examples=30, **SETTINGS)
@given(st.data())
def test_spacc(data):
    draw = data.draw
    depth = draw(st.integers(1, 3))
    outer = fill(skeleton(draw, depth), depth, lambda count: [Val(draw(st.integers(0, 5))) for _ in range(count)])
    inner = grow(draw, outer, lambda tok: [Val(draw(st.integers(0, 6))) for _ in range(draw(st.integers(0, 4)))])
    vals = [(Empty if draw(st.floats(0, 1)) < 0.2 else Val(draw(floats))) if isinstance(t, Val) else t
            for t in inner]
    check_apply("spacc", {"crd_outer": timed(draw, outer), "crd_inner": timed(draw, inner),
                          "val": timed(draw, vals)}, {"kind": draw(st.sampled_from(["sum", "max", "min"]))},
                hw=hw_for(draw, "spacc"))


@settings(max_examples=30, **SETTINGS)
@given(st.data())
def test_spacc2(data):
    draw = data.draw
    depth = draw(st.integers(1, 2))
    outer = fill(skeleton(draw, depth), depth, lambda count: [Val(draw(st.integers(0, 5))) for _ in range(count)])
    coords = lambda tok: [Val(draw(st.integers(0, 4))) for _ in range(draw(st.integers(0, 3)))]  # noqa: E731
    mid = grow(draw, outer, coords)
    inner = grow(draw, mid, coords)
    vals = [(Empty if draw(st.floats(0, 1)) < 0.2 else Val(draw(floats))) if isinstance(t, Val) else t
            for t in inner]
    check_apply("spacc2", {"crd_outer": timed(draw, outer), "crd_mid": timed(draw, mid),
                           "crd_inner": timed(draw, inner), "val": timed(draw, vals)},
                {"kind": draw(st.sampled_from(["sum", "max", "min"]))}, hw=hw_for(draw, "spacc2"))


@settings(max_examples=20, **SETTINGS)
@given(st.data())
def test_spacc2_grows_its_dense_table_and_moves_to_the_hash_table(data):
    """Coordinates past the dense table's first 32 rows x 64 columns, and (with a small cell limit)
    entries moving to the hash table in the middle of an outer fiber."""
    from fuseflow.sim.fast import spacc_tables

    draw = data.draw
    outer = fill(skeleton(draw, 1), 1, lambda count: [Val(draw(st.integers(0, 5))) for _ in range(count)])
    mid = grow(draw, outer, lambda tok: [Val(draw(st.integers(0, 300))) for _ in range(draw(st.integers(0, 20)))])
    inner = grow(draw, mid, lambda tok: [Val(draw(st.integers(0, 300))) for _ in range(draw(st.integers(0, 4)))])
    vals = [Val(draw(floats)) if isinstance(t, Val) else t for t in inner]
    limit = draw(st.sampled_from([spacc_tables.DENSE_CELLS, 4096, 1]))
    saved = spacc_tables.DENSE_CELLS, spacc_tables.DENSE_SLACK
    spacc_tables.DENSE_CELLS, spacc_tables.DENSE_SLACK = limit, min(limit, spacc_tables.DENSE_SLACK)
    try:
        check_apply("spacc2", {"crd_outer": timed(draw, outer), "crd_mid": timed(draw, mid),
                               "crd_inner": timed(draw, inner), "val": timed(draw, vals)},
                    {"kind": draw(st.sampled_from(["sum", "max"]))}, hw=hw_for(draw, "spacc2"))
    finally:
        spacc_tables.DENSE_CELLS, spacc_tables.DENSE_SLACK = saved


@settings(max_examples=20, **SETTINGS)
@given(st.data())
def test_crd_drop(data):
    draw = data.draw
    depth = draw(st.integers(1, 3))
    outer = fill(skeleton(draw, depth), depth, lambda count: [Val(c) for c in sorted_coords(draw, count)])
    inner = grow(draw, outer, lambda tok: [Val(c) for c in sorted_coords(draw, draw(st.sampled_from([0, 0, 1, 2])))])
    check_apply("crd_drop", {"outer": timed(draw, outer), "inner": timed(draw, inner)}, hw=hw_for(draw, "crd_drop"))


@settings(max_examples=25, **SETTINGS)
@given(st.data())
def test_writers(data):
    draw = data.draw
    depth = draw(st.integers(0, 3))
    if draw(st.booleans()):
        dim = draw(st.sampled_from([None, 6, 8]))
        toks = fill(skeleton(draw, max(depth, 1)), max(depth, 1),
                    lambda count: [Val(c) for c in sorted_coords(draw, count, dim or 8)])
        params = {"tensor": "T", "level": 0, "format": "compressed", "dim": dim}
    else:
        dim = draw(st.integers(0, 3))
        toks = fill(skeleton(draw, max(depth, 1)), max(depth, 1), lambda count: [Val(c) for c in range(dim)])
        params = {"tensor": "T", "level": 0, "format": "dense", "dim": dim}
    check_apply("level_write", {"crd": timed(draw, toks)}, params, hw=hw_for(draw, "level_write"))
    vals = fill(skeleton(draw, depth), depth, elem_list(draw, floats))
    check_apply("value_write", {"val": timed(draw, vals)}, {"tensor": "T"}, hw=hw_for(draw, "value_write"))


@settings(max_examples=20, **SETTINGS)
@given(st.data())
def test_fork_join(data):
    draw = data.draw
    depth = draw(st.integers(0, 3))
    value = draw(st.sampled_from([st.integers(0, 9), floats]))
    toks = fill(skeleton(draw, depth), depth, elem_list(draw, value))
    lanes = draw(st.integers(1, 3))
    run = check_apply("fork", {"in": timed(draw, toks)}, {"lanes": lanes}, arity=lanes, hw=hw_for(draw, "fork"))
    outs = [run.outs[f"out{k}"] for k in range(lanes)]
    depth_j = draw(st.integers(0, 1))
    if depth_j:
        outs = [grow(draw, lane, lambda tok: [tok] * draw(st.integers(0, 2))) for lane in outs]
    check_apply("join", {f"in{k}": timed(draw, lane) for k, lane in enumerate(outs)},
                {"lanes": lanes, "depth": depth_j}, arity=lanes, hw=hw_for(draw, "join"))


# -- malformed streams: the same exception (or the same result) ------------------------------------------
def garbage(draw, value):
    tok = st.one_of(value.map(Val), st.integers(0, 3).map(Stop), st.just(Empty), st.just(Done),
                    st.just(Repeat))
    toks = draw(st.lists(tok, max_size=7))
    if draw(st.booleans()):
        toks.append(Done)
    return timed(draw, toks)


PORTS = {  # kind -> (ports with their value strategies, params, arity)
    "scan": ({"ref": st.integers(-1, 3)}, {"tensor": "T", "level": 0, "format": "compressed", "dim": 4}, 0),
    "locate": ({"crd": st.integers(-1, 4), "ref": st.integers(0, 3)}, {"dim": 3}, 0),
    "repsig": ({"crd": st.integers(0, 3)}, {}, 0),
    "repeat": ({"in": floats, "sig": st.integers(0, 3)}, {}, 0),
    "intersect": ({"crd0": st.integers(0, 3), "pay0": floats, "crd1": st.integers(0, 3), "pay1": floats}, {}, 2),
    "union": ({"crd0": st.integers(0, 3), "pay0": st.integers(0, 3), "crd1": st.integers(0, 3),
               "pay1": floats}, {}, 2),
    "array": ({"ref": st.integers(-1, 3)}, {"tensor": "V"}, 0),
    "alu": ({"a": floats, "b": floats}, {"op": "add", "arity": 2}, 0),
    "reduce": ({"val": floats}, {"kind": "max"}, 0),
    "spacc": ({"crd_outer": st.integers(0, 3), "crd_inner": st.integers(0, 3), "val": floats}, {}, 0),
    "spacc2": ({"crd_outer": st.integers(0, 3), "crd_mid": st.integers(0, 3), "crd_inner": st.integers(0, 3),
                "val": floats}, {}, 0),
    "crd_drop": ({"outer": st.integers(0, 3), "inner": st.integers(0, 3)}, {}, 0),
    "level_write": ({"crd": st.integers(-1, 5)}, {"tensor": "T", "level": 0, "format": "compressed", "dim": 4}, 0),
    "value_write": ({"val": floats}, {"tensor": "T"}, 0),
    "broadcast": ({"in": st.integers(0, 3)}, {}, 2),
    "fork": ({"in": st.integers(0, 3)}, {"lanes": 2}, 2),
    "join": ({"in0": st.integers(0, 3), "in1": st.integers(0, 3)}, {"lanes": 2, "depth": 1}, 2),
}


@settings(max_examples=120, **SETTINGS)
@given(st.data())
def test_malformed_streams_fail_alike(data):
    draw = data.draw
    kind = draw(st.sampled_from(sorted(PORTS)))
    ports, params, arity = PORTS[kind]
    inputs = {p: garbage(draw, v) for p, v in ports.items()}
    tensors = {"T": StoredTensor([Level("compressed", 4, [0, 2, 2, 3], [1, 3, 0])], []),
               "V": StoredTensor([], [1.5, -2.0, 0.0])}
    check_apply(kind, inputs, params, tensors=tensors, arity=arity, hw=hw_for(draw, kind))


def test_bad_parameters_fail_alike():
    check_apply("alu", {"a": "1 S0 D"}, {"op": "add", "arity": 1})
    check_apply("alu", {"a": "1 S0 D"}, {"op": "nope"})
    check_apply("reduce", {"val": "1 S0 D"}, {"kind": "prod"})
    check_apply("scan", {"ref": "0 D"}, {"tensor": "missing", "level": 0, "format": "compressed"})
    check_apply("scan", {"ref": "0 D"}, {"tensor": "T", "level": 0, "format": "dense", "dim": 3},
                tensors={"T": StoredTensor([Level("dense", 4)], [])})
    check_apply("level_write", {"crd": "0 S0 D"}, {"tensor": "T", "format": "dense"})
    check_apply("fork", {"in": "1 D"}, {"lanes": 3}, arity=2)
    check_apply("join", {"in0": "1 D"}, {"lanes": 2}, arity=2)


def test_the_kernels_cover_the_oracle():
    """Every primitive, ALU op and reduction has a kernel (others would fall back to the oracle)."""
    assert set(fast.RUNNERS) == set(oracle.IMPLS)
    assert set(fast.ALU_CODES) == set(oracle.ALU_OPS)
    assert set(fast.REDUCE_CODES) == set(oracle.REDUCERS)


def test_doc_examples():
    assert oracle.format_tokens(fast.apply("spacc2", {
        "crd_outer": "0 1 S0 D", "crd_mid": "3 S0 3 4 S0 S1 D", "crd_inner": "5 S0 S1 5 S0 6 S0 S1 S2 D",
        "val": "1 S0 S1 2 S0 4 S0 S1 S2 D"}).outs["val"]) == "3 S0 4 S0 S1 D"
    check_apply("spacc", {"crd_outer": "0 1 S0 D", "crd_inner": "2 5 S0 5 S0 S1 D", "val": "1 1 S0 2 S0 S1 D"})


# -- every graph of the lowering cases ---------------------------------------------------------------
def assert_same_graph_run(got: oracle.GraphRun, want: oracle.GraphRun, where: str):
    for field in ("cycles", "node_steps", "stream_tokens", "counters", "max_occupancy", "stream_times"):
        assert getattr(got, field) == getattr(want, field), f"{where}: {field} differs"
    assert got.streams.keys() == want.streams.keys()
    for s in want.streams:
        assert_same_tokens(got.streams[s], want.streams[s], f"{where} {s}")
    assert got.written.keys() == want.written.keys(), where
    for name, w in want.written.items():
        assert got.written[name].levels.keys() == w.levels.keys(), f"{where}: {name} levels"
        for k, level in w.levels.items():
            assert same_level(got.written[name].levels[k], level), f"{where}: {name} level {k}"
        assert_same_floats(got.written[name].vals, w.vals, f"{where}: {name} values")


def random_chunks(seed: int):
    """Per-stream buffer sizes drawn at random (1-9 tokens), the same for a stream every time."""
    def size(stream):
        return 1 + (hash((seed, stream.node, stream.port)) % 9)
    return size


def check_schedule(compiled, data, where, hw=None, chunks=(None,)):
    """Every kernel of a schedule on both engines (the fast one with each buffer size): same
    streams, times, counters, occupancy, written tensors and outputs."""
    runs = {"oracle": []}

    def recorder(engine, fn, **kw):
        def run(graph, tensors, hw):
            r = fn(graph, tensors, hw, keep_streams=True, **kw)
            runs.setdefault(engine, []).append((graph.name, r))
            return r
        return run

    want = execute(compiled, data, hw, run_graph_fn=recorder("oracle", oracle.run_graph))
    for chunk in chunks:
        label = f"fast chunk={chunk if not callable(chunk) else 'random'}"
        got = execute(compiled, data, hw, run_graph_fn=recorder(label, fast.run_graph, chunk=chunk))
        assert len(runs[label]) == len(runs["oracle"])
        for (name, g), (_, w) in zip(runs[label], runs["oracle"]):
            assert_same_graph_run(g, w, f"{where} {name} ({label})")
        assert [vars(k) for k in got.kernels] == [vars(k) for k in want.kernels]
        for name in want.outputs:
            a, b = np.asarray(got.outputs[name]), np.asarray(want.outputs[name])
            assert a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64)), f"{where}: {name}"


CASES = [(path, schedule) for path in MLIR_FILES for schedule in schedules(*load(path))]


@pytest.mark.slow
@pytest.mark.parametrize("path, schedule", CASES, ids=[f"{os.path.basename(p)}-{s}" for p, s in CASES])
def test_lowered_graphs_match_oracle(path, schedule):
    program, shapes = load(path)
    data = fuseflow.random_inputs(program, density=0.3, seed=7, shapes=shapes)
    for k, variant in enumerate(order_variants(program, schedule, shapes, limit=3)):
        # the first variant also at one token per buffer, at small primes and at random sizes
        chunks = (None, 1, 5, random_chunks(k)) if k == 0 else (None,)
        check_schedule(compile_schedule(program, variant, shapes), data, f"{os.path.basename(path)} {variant}",
                       chunks=chunks)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["matmul_chain.mlir", "softmax_sparse.mlir", "masked_softmax.mlir"])
def test_graphs_with_latencies_ii_and_memory_model(name):
    """A non-default cycle model (latencies, initiation interval, the memory model)."""
    path = os.path.join(os.path.dirname(__file__), "mlir", name)
    if not os.path.exists(path):
        pytest.skip(f"{name} is not among the test programs")
    program, shapes = load(path)
    data = fuseflow.random_inputs(program, density=0.4, seed=3, shapes=shapes)
    hw = HwConfig(latency={"scan": 3, "intersect": 2, "union": 0, "alu": 4, "spacc": 5, "reduce": 2},
                  initiation_interval=2, hbm=True, hbm_channels=4, hbm_startup=9)
    for schedule in ("full", "unfused"):
        check_schedule(compile_schedule(program, schedule, shapes), data, f"{name} {schedule} with hw", hw,
                       chunks=(None, 1, random_chunks(3)))


def test_a_tiled_runs_buffers_do_not_wait_for_the_cycle_collector():
    """The engine's runners and channels refer to each other; a run's tile buffers are dropped
    when it ends, not when Python's cycle collector next runs (window runs by the hundred kept
    gigabytes of them alive: GPT-3 small2 b64's attention kernel)."""
    import gc  # noqa: PLC0415 - only this test

    from fuseflow.sim.fast.channel import Channel  # noqa: PLC0415 - only this test

    p = fuseflow.from_mlir("tests/mlir/matmul_chain.mlir")
    data = fuseflow.random_inputs(p, seed=1)
    gc.collect()
    before = {id(o) for o in gc.get_objects() if type(o) is Channel}  # other tests' (type(): a dead weak proxy raises)
    gc.disable()
    try:
        r = fuseflow.simulate(p, "full block=2", data)
        alive = [o for o in gc.get_objects() if type(o) is Channel and o.tiles is not None and id(o) not in before]
        assert alive, "a tiled run leaves its channels to the collector: the test sees them"
        assert all(c.tiles.size == 0 for c in alive)
    finally:
        gc.enable()
    assert r.verified
