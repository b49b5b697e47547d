"""The random-program fuzzer: hypothesis builds chains of 1-5 ops (tests/fuzz_programs.py) and
each is checked under drawn schedules (tests/fuzz_check.py): no internal error, every output
equal to the program's own numpy evaluation, the fast engine equal to the oracle, the default
schedule compiling, and `full` compiling unless the compiler proves no valid order exists.

CI runs a fixed 300 programs; `pytest tests/test_fuzz.py --fuzz N` runs N new ones and
`scripts/fuzz.py` any number with a tally (docs/fuzzing.md records a run of 10^4)."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_check import check_program
from fuzz_programs import HypothesisChooser, RandomChooser, random_program
from fuzz_upstream import UpstreamWorker

CI_EXAMPLES = 300


@pytest.mark.slow
def test_random_programs(request):
    count = request.config.getoption("--fuzz")

    @settings(max_examples=count or CI_EXAMPLES, derandomize=count is None, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data(), st.integers(0, 2**31 - 1))
    def case(data, seed):
        program = random_program(HypothesisChooser(data))
        outcomes = check_program(program, RandomChooser(seed), seed)
        failed = [f"{o.schedule}: {o.verdict}: {o.detail}" for o in outcomes if o.failed]
        assert not failed, f"{program.describe()}\n" + "\n".join(failed) + f"\n{program.mlir()}"

    case()


def test_the_generator_covers_the_op_kinds_formats_and_unit_sizes():
    """Over 300 programs every op kind, input format and a unit dimension appear."""
    programs = [random_program(RandomChooser(seed)) for seed in range(300)]
    kinds = {s.kind for p in programs for s in p.steps}
    formats = {v.fmt for p in programs for v in p.inputs}
    assert kinds == {"matmul", "contract", "add", "sub", "mul", "max", "relu", "exp", "broadcast", "transpose",
                     "reduce", "softmax"}
    assert formats == {"dense", "csr", "csc", "dcsr"}
    assert sum(any(1 in v.shape for v in p.inputs) for p in programs) > 50


@pytest.mark.slow
def test_upstream_mlir_agrees_where_it_can_lower():
    """The second oracle (tests/fuzz_upstream.py): upstream MLIR's sparsifier and ExecutionEngine
    run the programs they can lower, and fuseflow's outputs under every schedule equal theirs;
    of these eight programs, upstream lowers 2, 5, 6 and 7 (dense and CSR operands) and
    refuses 0, 1, 3 and 4 (`unlowered`, with MLIR's reason)."""
    verdicts = {}
    with UpstreamWorker() as worker:
        for seed in range(8):
            program = random_program(RandomChooser(seed))
            outcomes = check_program(program, RandomChooser(seed + 1), seed, count=0, upstream=worker)
            assert not [o for o in outcomes if o.failed], (seed, [(o.schedule, o.verdict, o.detail) for o in outcomes])
            verdicts[seed] = outcomes[-1].verdict
    assert verdicts == {0: "unlowered", 1: "unlowered", 2: "ok", 3: "unlowered", 4: "unlowered", 5: "ok", 6: "ok",
                        7: "ok"}


@pytest.mark.slow
def test_an_output_upstream_disagrees_with_is_a_failure():
    """An ok schedule whose output differs from upstream MLIR's is `differs`, and names where."""
    from fuzz_check import Outcome, check_upstream

    program = random_program(RandomChooser(7))
    data = program.data(0)
    wrong = {name: value + (value == value.max()) for name, value in program.evaluate(data).items()}
    with UpstreamWorker() as worker:
        right = check_upstream(program, data, [Outcome("full", "ok", "", program.evaluate(data))], worker)
        verdict = check_upstream(program, data, [Outcome("full", "ok", "", wrong)], worker)
    assert right.verdict == "ok" and verdict.verdict == "differs" and verdict.failed
    assert verdict.detail.startswith("full: t4 at (") and "(fuseflow vs upstream)" in verdict.detail
