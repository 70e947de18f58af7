"""The raptor chapter: its claims on known inputs, the result of a smoke run."""

import numpy as np
import pytest

from raptor.book.chapters import raptor as chapter
from raptor.book.claims import BY_CONSTRUCTION, FAILS, HOLDS, INCONCLUSIVE, across_seeds
from raptor.stats import Interval


# --- claims on synthetic inputs --------------------------------------------------------------

def test_min_cosine_interval_skips_the_shared_embedding() -> None:
    sizes = np.full(10, 50.0)
    rng = np.random.default_rng(0)
    cosine = {"cls": np.array([0.1, 0.95, 0.93]) + rng.normal(0, 0.01, (10, 3)),
              "patches": np.array([0.2, 0.97, 0.99]) + rng.normal(0, 0.01, (10, 3)),
              "registers": np.zeros((10, 3))}
    iv = chapter.min_cosine_interval(cosine, sizes)
    assert iv.estimate == pytest.approx(0.93, abs=0.01)  # not layer 0, not registers
    assert iv.low < iv.estimate < iv.high


def test_c15_cosine_high_on_intervals() -> None:
    held = chapter.c15_cosine_high({2: Interval(0.917, 0.91, 0.925, 0.95),
                                    3: Interval(0.956, 0.95, 0.96, 0.95)})
    assert held.verdict == HOLDS and held.tests == 2
    assert held.ours == ("k=2: min cosine 0.917 [0.910, 0.925], k=3: min cosine 0.956 "
                         "[0.950, 0.960]")
    assert held.detail.startswith("minimum over layers 1..L of the cls and patch cosine; "
                                  "threshold 0.9 [ours]; 95% bootstrap")
    low = {2: Interval(0.95, 0.94, 0.96, 0.95), 3: Interval(0.89, 0.88, 0.895, 0.95)}
    assert chapter.c15_cosine_high(low).verdict == FAILS
    spans = {2: Interval(0.905, 0.895, 0.915, 0.95)}
    assert chapter.c15_cosine_high(spans).verdict == INCONCLUSIVE


def test_c15_combines_seeds_by_the_binomial_test() -> None:
    good, bad = Interval(0.95, 0.94, 0.96, 0.95), Interval(0.85, 0.84, 0.86, 0.95)
    per_seed = {s: chapter.c15_cosine_high({2: iv}) for s, iv in enumerate((good, bad, good))}
    # two of three seeds holding is significant (P = 0.0018), one failing is not (P = 0.073)
    combined = across_seeds(per_seed)
    assert combined.verdict == HOLDS and combined.tests == 3
    assert combined.ours.endswith("(per seed: 0 holds, 1 does not hold, 2 holds)")


def test_c15_power_at_the_cpu_profile() -> None:
    """An ideal Raptor (cosine 0.97 at every layer, image noise as measured) holds at the cpu
    profile's 20 units of 50 images; one that dips to 0.85 at a layer does not."""
    sizes, rng = np.full(20, 50.0), np.random.default_rng(0)

    def cosine(dip: float) -> dict[str, np.ndarray]:
        curve = np.r_[0.5, np.full(8, 0.97)]
        curve[4] = dip
        return {g: curve + rng.normal(0, 0.01, (20, 9)) for g in ("cls", "patches")}

    ideal = {k: chapter.min_cosine_interval(cosine(0.97), sizes) for k in (2, 3)}
    assert chapter.c15_cosine_high(ideal).verdict == HOLDS
    dipped = {k: chapter.min_cosine_interval(cosine(0.85), sizes) for k in (2, 3)}
    assert chapter.c15_cosine_high(dipped).verdict == FAILS


def test_c25_shorter_description() -> None:
    held = chapter.c25_shorter_description(399872, 15681536, {2: 106560, 3: 159840},
                                           {2: 15730944, 3: 15730944})
    assert held.verdict == BY_CONSTRUCTION
    assert held.ours == ("k=2: 0.27× the bits, 1.003× the FLOPs, k=3: 0.40× the bits, "
                         "1.003× the FLOPs")
    assert held.detail == ("arithmetic, not a measurement: blocks' parameters at 32 bits "
                           "(depth-scaling MLPs included); FLOPs per image")
    # More bits than the teacher, or a different runtime, and it does not hold.
    assert chapter.c25_shorter_description(100, 1000, {2: 100}, {2: 1000}).verdict == FAILS
    assert chapter.c25_shorter_description(100, 1000, {2: 50}, {2: 1020}).verdict == FAILS


def test_thresholds_say_ours() -> None:
    for t in (chapter.MIN_COSINE, chapter.FLOPS_TOLERANCE):
        assert t.source.startswith("[ours]")


def test_cost_table_averages_seeds_and_relates_head_accuracy_to_the_teacher() -> None:
    def run(seed: int, teacher: float, student: float) -> chapter.SeedRun:
        models = [chapter.Model("teacher (L=8)", teacher, 0.79, 400, 1000),
                  chapter.Model("Raptor k=2", student, 0.7, 100, 1003)]
        return chapter.SeedRun(seed, {}, {}, {}, models, np.zeros(0), {})

    table = chapter.cost_table(chapter.Result(chapter.Spec(), [run(0, 0.8, 0.6), run(1, 0.8, 0.4)]))
    assert table.index.tolist() == ["teacher (L=8)", "Raptor k=2"]
    assert table["head acc"].tolist() == pytest.approx([0.8, 0.5])
    assert table["head sd"].tolist() == pytest.approx([0.0, np.sqrt(0.02)])
    assert table["% of teacher (head)"].tolist() == pytest.approx([100.0, 62.5])
    one = chapter.cost_table(chapter.Result(chapter.Spec(), [run(0, 0.8, 0.6)]))
    assert one["head sd"].isna().all()


# --- the chapter at smoke --------------------------------------------------------------------

@pytest.mark.slow
def test_smoke_result(smoke_result) -> None:
    spec = chapter.SMOKE
    [result] = smoke_result(chapter.NAME).runs
    assert result.seed == spec.seeds[0]
    L = spec.teacher.depth
    assert list(result.partitions) == list(spec.k_values) == list(result.evals)
    assert [len(p) for p in result.partitions.values()] == list(spec.k_values)
    for e in result.evals.values():
        assert all(len(e[m][g]) == L + 1 for m in ("r2", "cosine") for g in chapter.GROUPS)
    assert [m.name for m in result.models] == [f"teacher (L={L})", "Raptor k=2"]
    assert all(0 <= m.head_acc <= 1 and 0 <= m.probe_acc <= 1 for m in result.models)
    teacher, student = result.models
    assert student.block_params < teacher.block_params
    assert len(result.records[2]["stage1"]["loss"]) == spec.distill.stage1_steps
