"""Every way of running a schedule does the whole run's work: sharded runs read each intermediate
as its producer stored it (explicit zeros included), so their tokens, FLOPs, reads and writes
equal the whole run's kernel by kernel, and their cycles stay within the boundaries' margins."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fuseflow
from fuseflow.partition import footing
from fuseflow.partition.run import simulate_partitioned
from fuseflow.pipeline import work_differences

PROGRAMS = sorted(p.stem for p in Path("tests/mlir").glob("*.mlir") if p.stem not in ("dynamic", "masked_softmax"))
# sharded cycles against whole: the margins settle on windows of a few coordinates only roughly
# (karate's 34-row loop in 4 windows: GCN full +3.3%); on Cora-sized loops they are exact or
# within 0.1% (test_sharded_cora_twin_is_the_whole_run)
SHORT_LOOP_CYCLES = 0.04


def _same_work(got, want) -> list:
    """The kernels whose counts differ: (index, what, got, want)."""
    return work_differences(got.kernels, want.kernels)


@pytest.mark.parametrize("schedule", ["unfused", "full"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_sharded_test_programs_do_the_whole_runs_work(name, schedule):
    program = fuseflow.from_mlir(f"tests/mlir/{name}.mlir")
    whole = fuseflow.simulate(program, schedule, seed=2, density=0.3)
    for shards in (2, 3, 4):
        r = simulate_partitioned(program, schedule, seed=2, density=0.3, shards=shards)
        assert r.verified and not _same_work(r, whole), (shards, _same_work(r, whole))
        assert abs(r.cycles - whole.cycles) <= SHORT_LOOP_CYCLES * whole.cycles, (shards, r.cycles, whole.cycles)


@pytest.mark.parametrize("preset", ["unfused", "partial", "full"])
@pytest.mark.parametrize("model", ["gcn", "graphsage", "sae"])
def test_sharded_models_do_the_whole_runs_work(model, preset, monkeypatch):
    """Built-in models on karate (sae on its own small inputs): the intermediates a later kernel
    reads as stored carry explicit zeros (ReLU, A·X over dense features), and each is stored on
    exactly the whole run's positions."""
    case = fuseflow.model(model, dataset="karate") if model != "sae" else fuseflow.model(model)
    whole = fuseflow.simulate(case.program, case.presets[preset], case.inputs)
    stored = []
    real = footing.stored_as_written
    monkeypatch.setattr("fuseflow.partition.run.stored_as_written",
                        lambda *a: stored.append(real(*a)) or stored[-1])
    for shards in (2, 3):
        r = simulate_partitioned(case.program, case.presets[preset], case.inputs, shards=shards)
        assert r.verified and not _same_work(r, whole), (shards, _same_work(r, whole))
        assert abs(r.cycles - whole.cycles) <= SHORT_LOOP_CYCLES * whole.cycles, (shards, r.cycles, whole.cycles)
    if preset == "unfused" and model != "sae":
        zeros = sum(int((t.vals == 0).sum()) for t in stored)
        assert zeros > 0  # the case this guards: values alone would have dropped them


def test_sharded_cora_twin_is_the_whole_run():
    """GCN unfused on a synthetic graph with Cora's statistics (a tenth of its size): the
    sharded run is the whole run, counts and cycles."""
    case = fuseflow.model("gcn", dataset="synthetic:cora", scale=0.1)
    whole = fuseflow.simulate(case.program, case.presets["unfused"], case.inputs)
    for shards in (2, 3):
        r = simulate_partitioned(case.program, case.presets["unfused"], case.inputs, shards=shards)
        assert r.verified and not _same_work(r, whole)
        assert abs(r.cycles - whole.cycles) <= 0.001 * whole.cycles, (shards, r.cycles, whole.cycles)


def test_a_reading_kernel_takes_the_producers_pattern_not_the_values():
    """The stored positions of a ReLU's output include its zeros; storing from values would not."""
    import numpy as np

    from fuseflow.sam.graph import GraphTensor

    meta = GraphTensor("output", (2, 2), ("compressed", "compressed"), (0, 1))
    pattern = np.array([[0, 0, 1], [0, 1, 1]])
    t = footing.stored_as_written(pattern, meta, np.array([[0.0, 2.0], [0.0, 0.0]]))
    assert t.levels[0].crd.tolist() == [0, 1] and t.levels[1].crd.tolist() == [0, 1, 1]
    assert t.vals.tolist() == [0.0, 2.0, 0.0]


def _derived_and_written(program, schedule, inputs, seed, density, monkeypatch) -> list:
    """(kernel, output, derived pattern, the windows' pattern) of every output a later kernel
    reads as stored, from a 2-shard run."""
    from fuseflow.partition import run as partition_run
    from fuseflow.partition.structure import derived_pattern
    from fuseflow.partition.windows import kernel_setup

    setups, combined = [], []
    real_combined = footing.combined_pattern

    def setup_spy(kernel, *args, **kwargs):
        setup = kernel_setup(kernel, *args, **kwargs)
        setups.extend((kernel, setup, name) for name in sorted(setup.patterns))
        return setup

    monkeypatch.setattr(partition_run, "kernel_setup", setup_spy)
    monkeypatch.setattr(partition_run, "combined_pattern",
                        lambda found, shape: combined.append(real_combined(found, shape)) or combined[-1])
    simulate_partitioned(program, schedule, inputs, seed=seed, density=density, shards=2)
    return [(k, name, _listed(derived_pattern(k, s, name)), c) for (k, s, name), c in zip(setups, combined)]


def _listed(pattern):
    """A derived pattern as coordinates (`EveryPosition` listed), None kept."""
    return None if pattern is None else footing.as_coords(pattern)


@pytest.mark.parametrize("name", PROGRAMS)
def test_derived_patterns_are_what_the_windows_stored_test_programs(name, monkeypatch):
    program = fuseflow.from_mlir(f"tests/mlir/{name}.mlir")
    for kernel, out, derived, written in _derived_and_written(program, "unfused", None, 2, 0.3, monkeypatch):
        assert derived is None or (derived.shape == written.shape and (derived == written).all()), (kernel.index, out)


@pytest.mark.parametrize("model", ["gcn", "graphsage", "sae"])
def test_derived_patterns_are_what_the_windows_stored_models(model, monkeypatch):
    """Every intermediate of the built-in models' unfused and partial schedules is derived (none
    needs every window of its producer simulated) and equals what the windows stored."""
    case = fuseflow.model(model, dataset="karate") if model != "sae" else fuseflow.model(model)
    for preset in ("unfused", "partial"):
        found = _derived_and_written(case.program, case.presets[preset], case.inputs, 0, 0.1, monkeypatch)
        assert found or preset == "partial"  # a partial schedule's intermediates may all be stored dense
        for kernel, out, derived, written in found:
            assert derived is not None, (preset, kernel.index, out)
            assert derived.shape == written.shape and (derived == written).all(), (preset, kernel.index, out)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gcn", "graphsage"])
def test_sampled_on_the_producers_patterns_holds_the_whole_run(model):
    """Sampled, every kernel of the Cora twin's unfused and partial schedules (their producers'
    patterns derived, checked on every sampled window): the 95% interval holds the whole run."""
    from fuseflow.partition.sampled import SamplePlan

    case = fuseflow.model(model, dataset="synthetic:cora", scale=0.1)
    for preset in ("unfused", "partial"):
        whole = fuseflow.simulate(case.program, case.presets[preset], case.inputs)
        r = simulate_partitioned(case.program, case.presets[preset], case.inputs,
                                 sample=SamplePlan(fraction=0.3, min_width=2, whole_below=0, seed=1))
        assert r.mode == "sampled" and r.verified and all(k.mode == "sampled" for k in r.kernels)
        assert r.cycles_low <= whole.cycles <= r.cycles_high, (preset, r.cycles_low, whole.cycles, r.cycles_high)


def test_a_pattern_beyond_the_budget_is_not_derived():
    """Deriving holds the nest's points: past the budget it gives None (the sampled mode then
    simulates every window of the producer), never a partial pattern. A pattern of every
    position is known without listing any: `EveryPosition`, within any budget."""
    from fuseflow.memory import Budget, resident_bytes
    from fuseflow.partition.structure import derived_pattern
    from fuseflow.partition.windows import kernel_setup, reference_values
    from fuseflow.pipeline import prepared

    program = fuseflow.from_mlir("tests/mlir/spmm_ikj.mlir")
    data, compiled = prepared(program, "full", None, 1, 0.05)
    kernel = compiled.kernels[0]
    setup = kernel_setup(kernel, reference_values(program, data))
    listed = derived_pattern(kernel, setup, "Y")
    assert listed.shape[0] == 2 and 0 < listed.shape[1] < np.prod(kernel.graph.tensors["Y"].shape)
    assert derived_pattern(kernel, setup, "Y", Budget(resident_bytes() + 100)) is None

    from fuseflow.partition import run as partition_run

    setups = []

    def setup_spy(kernel, *args, **kwargs):
        setup = kernel_setup(kernel, *args, **kwargs)
        setups.extend((kernel, setup, name) for name in sorted(setup.patterns))
        return setup

    case = fuseflow.model("gcn", dataset="karate")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(partition_run, "kernel_setup", setup_spy)
        simulate_partitioned(case.program, case.presets["unfused"], case.inputs, shards=2)
    tight = Budget(resident_bytes() + 10_000)
    every = [(k.index, name) for k, s, name in setups
             if derived_pattern(k, s, name, tight) == footing.EveryPosition(k.graph.tensors[name].shape)]
    assert (4, "t8") in every, every  # A·t7: every node has an edge, t7 dense


def test_every_position_is_stored_as_the_listed_pattern_would_be():
    """`stored_as_written` on `EveryPosition` builds what listing every position builds, in
    each layout (dense and compressed levels, both orders, blocked), zeros included."""
    from fuseflow.sam.graph import GraphTensor

    rng = np.random.default_rng(3)
    value = rng.random((4, 6)) * (rng.random((4, 6)) < 0.5)
    for levels in (("dense", "compressed"), ("compressed", "compressed"), ("compressed", "dense")):
        for order in ((0, 1), (1, 0)):
            for block in (None, (2, 3)):
                every = footing.EveryPosition((2, 2) if block else (4, 6))  # a blocked one's: its grid's
                meta = GraphTensor("output", (4, 6), levels, order, block=block)
                a = footing.stored_as_written(every, meta, value)
                b = footing.stored_as_written(every.coords(), meta, value)
                assert len(a.levels) == len(b.levels) and np.array_equal(a.vals, b.vals), (levels, order, block)
                for x, y in zip(a.levels, b.levels):
                    same = not x.is_compressed or (x.seg.tolist(), x.crd.tolist()) == (y.seg.tolist(), y.crd.tolist())
                    assert x.format == y.format and same, (levels, order, block)
                assert np.array_equal(a.to_dense(), value)
