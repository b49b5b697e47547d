"""Blocked execution: blocked storage, tile-valued streams on both engines, block-mode timing."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow.cli import main
from fuseflow.errors import UserError
from fuseflow.execute import execute
from fuseflow.fusion.compile import compile_schedule
from fuseflow.ir.formats import TensorFormat
from fuseflow.ir.generate import random_inputs
from fuseflow.models.attention import bigbird_attention
from fuseflow.pipeline import simulate
from fuseflow.schedule.schedule import Schedule
from fuseflow.sim import fast, oracle
from fuseflow.sim.hw import HwConfig
from fuseflow.sim.storage import StoredTensor
from fuseflow.sim.tiles import Tile
from fuseflow.sim.tokens import Done, Empty, Stop, Val

MLIR = "tests/mlir/{}.mlir"


# -- storage -----------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.data())
def test_blocked_storage_round_trips(data):
    rank = data.draw(st.integers(1, 3))
    block = tuple(data.draw(st.integers(1, 3)) for _ in range(rank))
    grid = tuple(data.draw(st.integers(1, 3)) for _ in range(rank))
    fill = data.draw(st.sampled_from([0.0, float("-inf")]))
    kept = np.array(data.draw(st.lists(st.booleans(), min_size=int(np.prod(grid)), max_size=int(np.prod(grid)))))
    values = np.arange(1.0, 1.0 + np.prod(grid) * np.prod(block)).reshape([g * b for g, b in zip(grid, block)])
    mask = np.kron(kept.reshape(grid), np.ones(block, dtype=bool))
    dense = np.where(mask, values, fill)
    levels = ",".join(data.draw(st.sampled_from(["dense", "compressed"])) for _ in range(rank))
    order = data.draw(st.permutations(range(rank)))
    fmt = TensorFormat.parse(f"{levels};order={','.join(map(str, order))};block={'x'.join(map(str, block))}")
    t = StoredTensor.from_dense(dense, fmt, fill)
    assert t.vals.shape[1:] == block
    assert np.array_equal(t.to_dense(), dense)
    if all(level.is_compressed for level in t.levels):  # exactly the blocks holding a non-fill entry
        assert len(t.vals) == int(kept.sum())


def test_blocked_storage_rejects_blocks_that_do_not_divide():
    with pytest.raises(UserError, match="does not divide"):
        StoredTensor.from_dense(np.zeros((4, 6)), TensorFormat.parse("dense,dense;block=4x4"))


# -- schedules and errors ------------------------------------------------------------------------------
def test_block_item_round_trips():
    for text in ("unfused block=16", "full order=i,k,j block=32", "fusion=[a][b] block=1"):
        assert str(Schedule.parse(text)) == text
    assert Schedule.parse("full").block is None


@pytest.mark.parametrize("item", ["block=0", "block=-4", "block=x", "block=2.5"])
def test_block_size_must_be_a_positive_integer(item):
    with pytest.raises(UserError, match="positive integer"):
        Schedule.parse(f"full {item}")


def test_block_that_divides_nothing_is_a_user_error():
    p = fuseflow.from_mlir(MLIR.format("shared_filter"))  # every dimension is odd
    with pytest.raises(UserError, match="block=4 divides no dimension"):
        compile_schedule(p, "full block=4")


def test_blocked_formats_must_fit():
    p = fuseflow.from_mlir(MLIR.format("spmv"))  # A is 64x48 (see the file)
    with pytest.raises(UserError, match="does not divide"):
        compile_schedule(p, "full format.A=dense,compressed;block=7x1 block=7")
    with pytest.raises(UserError, match="declares block=8x8"):  # block=16 tiles A as 16x16
        compile_schedule(p, "full format.A=dense,compressed;block=8x8 block=16")
    with pytest.raises(UserError, match="needs blocked execution"):
        compile_schedule(p, "full format.A=dense,compressed;block=16x16")
    compiled = compile_schedule(p, "full format.A=dense,compressed;block=16x16 block=16")
    assert str(compiled.formats["A"]) == "dense,compressed;block=16x16"


def test_cli_prints_one_line_for_a_bad_block(capsys):
    assert main(["simulate", MLIR.format("spmv"), "--schedule", "full block=0"]) == 2
    err = capsys.readouterr().err
    assert "block=0" in err and err.count("\n") == 1


# -- whole programs, both engines ----------------------------------------------------------------------
CASES = ["matmul_chain", "spmv", "spmm_ikj", "sddmm", "sddmm_masked", "softmax_sparse", "gelu", "relu",
         "unary_ops", "transpose", "batch_matmul", "constants", "reshape"]


def _runs(name: str, schedule: str, seed: int = 1):
    p = fuseflow.from_mlir(MLIR.format(name))
    data = random_inputs(p, density=0.3, seed=seed)
    compiled = compile_schedule(p, schedule)
    return p, data, execute(compiled, data, run_graph_fn=oracle.run_graph), \
        execute(compiled, data, run_graph_fn=fast.run_graph)


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("fusion", ["unfused", "full"])
@pytest.mark.parametrize("b", [1, 2, 4])
def test_blocked_programs_match_reference_and_engines_agree(name, fusion, b):
    p, data, slow, quick = _runs(name, f"{fusion} block={b}")
    gold = fuseflow.reference(p, data)
    for out in p.outputs:
        assert np.allclose(slow.outputs[out], gold[out], rtol=1e-6, atol=1e-9, equal_nan=True), out
    for tensor in slow.values:
        assert np.array_equal(slow.values[tensor], quick.values[tensor], equal_nan=True), tensor
    assert [(k.cycles, k.counters) for k in slow.kernels] == [(k.cycles, k.counters) for k in quick.kernels]


def test_block_of_one_counts_like_scalar():
    # 1x1 tiles: the same values, and the same FLOPs, since a 1x1x1 tile matmul is 2 - 1 FLOPs and
    # the reducer adds 1: a multiply-add as in the scalar run
    p, data, scalar, _ = _runs("matmul_chain", "full")
    _, _, blocked, _ = _runs("matmul_chain", "full block=1")
    for out in p.outputs:
        assert np.allclose(scalar.outputs[out], blocked.outputs[out])
    assert scalar.total("flops") == blocked.total("flops")


# -- tile primitives on random streams -----------------------------------------------------------------
def _tile(rng, shape):
    return Tile(np.round(rng.normal(size=shape), 3))


def _same_runs(a, b):
    assert a.steps == b.steps and a.last_step == b.last_step and a.counters == b.counters
    for port in a.outs:
        assert a.times[port] == b.times[port]
        for x, y in zip(a.outs[port], b.outs[port], strict=True):
            if isinstance(x, Val) and isinstance(x.x, Tile):
                assert np.array_equal(x.x.a, y.x.a, equal_nan=True)
            else:
                assert x == y


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_tile_reduce_and_alu_agree_on_random_streams(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 10**6)))
    b = data.draw(st.sampled_from([1, 2, 4]))
    kind = data.draw(st.sampled_from(["sum", "max", "min"]))
    fibers = data.draw(st.lists(st.lists(st.booleans(), max_size=4), min_size=1, max_size=4))
    toks = []
    for fiber in fibers:
        toks += [Val(_tile(rng, (b, b))) if present else Empty for present in fiber] + [Stop(0)]
    toks += [Stop(1), Done]
    times = sorted(data.draw(st.lists(st.integers(0, 30), min_size=len(toks), max_size=len(toks))))
    params = {"kind": kind, "tile": {"b": b, "in": [["i", "j"]], "out": ["i"]}}
    ins = {"val": (toks, times)}
    _same_runs(oracle.apply("reduce", ins, params), fast.apply("reduce", ins, params))
    other = [Val(_tile(rng, (b, b))) if isinstance(t, Val) or t is Empty else t for t in toks]
    op = data.draw(st.sampled_from(["add", "mul", "max", "div", "gt"]))
    contract = op == "mul" and data.draw(st.booleans())
    out = ["i", "j"] if contract else ["i", "k", "j"] if op == "mul" else ["i", "k"]
    params = {"op": op, "arity": 2, "tile": {"b": b, "in": [["i", "k"], ["k", "j"] if op == "mul" else ["i", "k"]],
                                             "out": out}}
    ins = {"a": (toks, times), "b": (other, times)}
    _same_runs(oracle.apply("alu", ins, params), fast.apply("alu", ins, params))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_tile_spacc_agrees_on_random_streams(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 10**6)))
    b = data.draw(st.sampled_from([1, 2, 3]))
    coords = st.lists(st.integers(0, 4), max_size=3, unique=True).map(sorted)
    rows = data.draw(st.lists(st.lists(coords, max_size=3), min_size=1, max_size=3))  # i -> r -> j's
    outer, inner, vals = [], [], []
    for r_fibers in rows:
        for r, js in enumerate(r_fibers):
            outer.append(Val(r))
            inner += [Val(j) for j in js] + [Stop(0)]
            vals += [Val(_tile(rng, (b, b))) if data.draw(st.booleans()) else Empty for _ in js] + [Stop(0)]
        outer.append(Stop(0))
        inner.append(Stop(1))
        vals.append(Stop(1))
    outer += [Stop(1), Done]
    inner += [Stop(2), Done]
    vals += [Stop(2), Done]
    params = {"kind": data.draw(st.sampled_from(["sum", "max"])),
              "tile": {"b": b, "in": [["i", "j"]], "out": ["j", "i"]}}
    ins = {"crd_outer": outer, "crd_inner": inner, "val": vals}
    _same_runs(oracle.apply("spacc", ins, params), fast.apply("spacc", ins, params))


# -- block-mode timing ---------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", [oracle, fast])
def test_tile_matmul_takes_latency_2b_minus_1_and_interval_b(engine):
    b, rng = 4, np.random.default_rng(0)
    toks = [Val(_tile(rng, (b, b))) for _ in range(3)] + [Done]
    params = {"op": "mul", "arity": 2, "tile": {"b": b, "in": [["i", "k"], ["k", "j"]], "out": ["i", "j"]}}
    run = engine.apply("alu", {"a": toks, "b": toks}, params)
    # steps every II = B cycles from 0; each output visible 2B-1 cycles after its step
    assert run.times["val"] == [t + 2 * b - 1 for t in (0, b, 2 * b, 3 * b)]
    assert run.counters["flops"] == 3 * (2 * b**3 - b**2)
    add = dict(params, op="add", tile={"b": b, "in": [["i", "j"], ["i", "j"]], "out": ["i", "j"]})
    run = engine.apply("alu", {"a": toks, "b": toks}, add)
    assert run.times["val"] == [t + b * b for t in range(4)]  # elementwise: latency B², II 1


def test_tile_costs_come_from_hwconfig():
    hw = HwConfig()
    hw.tile_costs = dict(hw.tile_costs)
    from fuseflow.sim.hw import TileCost

    hw.tile_costs["matmul"] = TileCost((0, 0, 5), (0, 0, 2))
    params = {"op": "mul", "arity": 2, "tile": {"b": 8, "in": [["i", "k"], ["k", "j"]], "out": ["i", "j"]}}
    assert hw.timing("alu", params) == (5, 2)
    assert hw.timing("alu", {"op": "mul"}) == (1, 1)


# -- blocked attention with a BigBird mask ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("b", [16, 32])
@pytest.mark.parametrize("fusion", ["unfused", "full"])
def test_blocked_bigbird_attention(b, fusion):
    p, data = bigbird_attention(128, 32, b)
    scalar = simulate(p, fusion, data, engine="fast")
    runs = [simulate(p, f"{fusion} block={b}", data, engine=e) for e in ("oracle", "fast")]
    assert all(r.verified for r in runs)
    one, two = runs
    def counts(r):
        return r.cycles, r.flops, r.mem_reads, r.mem_writes

    assert counts(one) == counts(two)
    for out in p.outputs:
        assert np.array_equal(one.outputs[out], two.outputs[out])
    # the mask's blocks are the tiles and q, k, v are dense, so the blocked run visits exactly the
    # scalar run's entries, and tile FLOPs count elements: the same FLOPs
    assert one.flops == scalar.flops
    # a tile read is B² words, as B² scalar reads, but coordinates are read per block
    assert one.mem_reads < scalar.mem_reads and one.mem_writes <= scalar.mem_writes
    # tile ops handle B² elements per step (II 1, a matmul per B cycles)
    assert one.cycles * 10 < scalar.cycles


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_tile_spacc2_agrees_on_random_streams(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 10**6)))
    b = data.draw(st.sampled_from([1, 2]))
    coords = st.lists(st.integers(0, 3), max_size=3, unique=True).map(sorted)
    tops = data.draw(st.lists(st.lists(st.lists(coords, max_size=2), max_size=3), min_size=1, max_size=2))
    outer, mid, inner, vals = [], [], [], []
    for r_fibers in tops:  # top -> r -> w1 -> w2's
        for r, w1_fibers in enumerate(r_fibers):
            outer.append(Val(r))
            for w1, w2s in enumerate(w1_fibers):
                mid.append(Val(w1))
                inner += [Val(w) for w in w2s] + [Stop(0)]
                vals += [Val(_tile(rng, (b, b))) if data.draw(st.booleans()) else Empty for _ in w2s] + [Stop(0)]
            mid.append(Stop(0))
            inner.append(Stop(1))
            vals.append(Stop(1))
        outer.append(Stop(0))
        mid.append(Stop(1))
        inner.append(Stop(2))
        vals.append(Stop(2))
    outer += [Stop(1), Done]
    mid += [Stop(2), Done]
    inner += [Stop(3), Done]
    vals += [Stop(3), Done]
    params = {"kind": "sum", "tile": {"b": b, "in": [["i", "j"]], "out": ["i"]}}
    ins = {"crd_outer": outer, "crd_mid": mid, "crd_inner": inner, "val": vals}
    _same_runs(oracle.apply("spacc2", ins, params), fast.apply("spacc2", ins, params))


@pytest.mark.slow
@pytest.mark.parametrize("hw", [HwConfig(hbm=True), HwConfig(channel_depth=4)], ids=["hbm", "bounded"])
def test_blocked_attention_engines_agree_under_memory_and_bounded_channels(hw):
    p, data = bigbird_attention(64, 32, 16)
    base = simulate(p, "unfused block=16", data, engine="fast")
    one, two = (simulate(p, "unfused block=16", data, engine=e, hw=hw) for e in ("oracle", "fast"))
    assert one.verified and (one.cycles, one.flops, one.mem_reads, one.mem_writes) == \
        (two.cycles, two.flops, two.mem_reads, two.mem_writes)
    assert one.cycles > base.cycles  # memory stalls and full channels only ever delay
