"""The claims of chapter *Stochastic depth and recurrent compressibility* (C5–C8), their
thresholds, and the prose findings that quote them."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from raptor import paper
from raptor.book.chapters.stochastic_depth.compute import Result, sweep_table
from raptor.book.claims import (FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE, Claim, Threshold,
                                claim, counted, listed)
from raptor.book.engine import Declaration, Part, correlation_over_models, judge
from raptor.stats import correlation, partial_correlation, rank_correlation

RISES = Threshold(0.0, "[ours] the paper reports the rises (Fig. 4) without a test; a rise is "
                       "Spearman's ρ with p above 0 on its 95% Fisher-z interval (Bonett & "
                       "Wright 2000 standard error), one teacher one unit")
RISE_UP_TO = Threshold(paper.SD_RISE_UP_TO, "\"increasing SD improves CIFAR-100 classification "
                                            "accuracy\" (§2, Fig. 4C), up to p ≈ 0.6")
ASSOCIATED = Threshold(0.0, "[ours] \"a strong positive association\" (§2, Fig. 4E) without a "
                            "test: Fig. 4E plots every teacher of the sweep, so the association "
                            "is Pearson's r over them, above 0 on its 95% Fisher-z interval")
WITHIN = Threshold(0.0, "[ours] beside C8, not the paper's statistic: the rate p drives both "
                        "similarity and R², so a Pearson r within rates (the partial correlation "
                        "given p as a factor) above 0 says whether they go together beyond it")
MIN_TEACHERS = 5  # a rank correlation's interval needs n >= 5 (raptor.stats.rank_correlation)
RHO_NOTE = "Spearman ρ with p over the teachers, Fisher-z interval (Bonett–Wright standard error)"


def _rise(name: str, y: Sequence[float], p: Sequence[float], what: str) -> Part:
    """"``y`` rises with ``p``": Spearman's ρ over the teachers against :data:`RISES`."""
    c = rank_correlation(y, p)
    return Part(name, correlation_over_models(c.interval, c.n), RISES, fmt=".2f",
                what=f"Spearman ρ of {what} with p")


def _too_few(claim_id: str, paper_says: str, n: int) -> Claim:
    return claim(claim_id, paper=paper_says, ours=f"{n} teachers", holds=None,
                 detail=f"a rank correlation's interval needs at least {MIN_TEACHERS} teachers, "
                        f"got {n}")


def c5_similarity_rises(p: Sequence[float], similarity: Sequence[float]) -> Claim:
    """C5: the teachers' mean off-diagonal similarity rises with p (Fig. 4A, E)."""
    paper_says = "similarity rises with p (Fig. 4A, E)"
    if len(p) < MIN_TEACHERS:
        return _too_few("C5", paper_says, len(p))
    return judge(Declaration("C5", paper_says, [
        _rise("ρ", similarity, p, "the teachers' mean off-diagonal similarity")], note=RHO_NOTE))


def c6_r2_rises(p: Sequence[float], r2: Sequence[float]) -> Claim:
    """C6: the Raptors' mean (cls, patch) R² rises with p (Fig. 4B, D)."""
    paper_says = "R² rises with p (Fig. 4B, D)"
    if len(p) < MIN_TEACHERS:
        return _too_few("C6", paper_says, len(p))
    return judge(Declaration("C6", paper_says, [
        _rise("ρ", r2, p, "the Raptors' mean (cls, patch) R²")], note=RHO_NOTE))


def c7_accuracy_rises(p: Sequence[float], teacher_acc: Sequence[float],
                      student_acc: Sequence[float]) -> Claim:
    """C7: teacher and student accuracy both rise with p, over p ≤ ``RISE_UP_TO`` (Fig. 4C)."""
    paper_says = f"teacher and student accuracy rise with p up to ~{RISE_UP_TO.value} (Fig. 4C)"
    low = [i for i, v in enumerate(p) if v <= RISE_UP_TO.value]
    if len(low) < MIN_TEACHERS:
        return _too_few("C7", paper_says, len(low))
    at = [p[i] for i in low]
    return judge(Declaration("C7", paper_says, [
        _rise(f"{who} ρ", [acc[i] for i in low], at, f"{who} accuracy")
        for who, acc in (("teacher", teacher_acc), ("student", student_acc))],
        note=f"{RHO_NOTE}, over p ≤ {RISE_UP_TO.value}"))


def c8_similarity_predicts_r2(p: Sequence[float], similarity: Sequence[float],
                              r2: Sequence[float]) -> Claim:
    """C8 (§2, Fig. 4E): similarity and R² are positively associated over the teachers of the
    sweep, the pooled Pearson r that Fig. 4E plots (and the figure's title gives) above 0;
    beside it, not judged, the partial correlation given p as a factor, which removes what the
    rate drives in both."""
    pooled = correlation(similarity, r2)
    levels = len(set(p))
    paper_says = "similarity strongly associated with R² (Fig. 4E)"
    judged = Part("r", correlation_over_models(pooled.interval, pooled.n), ASSOCIATED, fmt=".2f",
                  what=f"Pearson r of similarity and R² over the {pooled.n} teachers")
    if len(p) < levels + 3:
        return judge(Declaration(
            "C8", paper_says, [judged],
            note=f"Pearson r over the teachers (Fig. 4E), Fisher-z interval; the correlation "
                 f"within rates, beside it, needs at least rates + 3 = {levels + 3} teachers"))
    a = partial_correlation(similarity, r2, p)
    return judge(Declaration(
        "C8", paper_says, [judged],
        also=[Part("r within p", correlation_over_models(a.interval, a.n), WITHIN, fmt=".2f",
                   what=f"Pearson r of similarity and R² within the {levels} rates")],
        note=f"Pearson r over the teachers (Fig. 4E), Fisher-z interval; beside it the partial "
             f"correlation given p as a factor (OLS, Fisher-z interval on n − {levels} − 1 "
             f"residual degrees of freedom), not the paper's statistic: p drives both"))


def claims(result: Result) -> list[Claim]:
    s = sweep_table(result)
    p, sim, r2 = list(s["p"]), list(s["mean similarity"]), list(s["R²"])
    return [c5_similarity_rises(p, sim), c6_r2_rises(p, r2),
            c7_accuracy_rises(p, list(s["teacher acc"]), list(s["student acc"])),
            c8_similarity_predicts_r2(p, sim, r2)]


# What a verdict says of a rise with p (C5–C7), of one subject and of several.
RISE_WORDS = {HOLDS: ("rises", "rise"), FAILS: ("does not rise", "do not rise"),
              INCONCLUSIVE: ("does not clearly rise", "do not clearly rise"),
              UNTESTABLE: ("cannot be tested for a rise", "cannot be tested for a rise")}
# What C8's verdict says of similarity and R² across the teachers.
ASSOCIATION_WORDS = {HOLDS: "go together", FAILS: "do not go together",
                     INCONCLUSIVE: "are not clearly associated",
                     UNTESTABLE: "cannot be tested for an association"}


def findings(result: Result, checks: Sequence[Claim]) -> dict[str, str]:
    """The *Found* sentence's parts, as glued text: the sweep's teachers, and in the words of each
    verdict (of ``checks``) whether similarity, R² and accuracy rise with p (C5–C7) and similarity
    goes with R² (C8), each with its statistic where there are teachers enough for it."""
    s, verdict = sweep_table(result), {c.id: c.verdict for c in checks}
    low = s[s["p"] <= RISE_UP_TO.value]
    up_to = "" if len(low) == len(s) else f" up to p = {RISE_UP_TO.value:g}"

    def rho(table: pd.DataFrame, columns: dict[str, str]) -> str:
        """Spearman's ρ with p of each column (named for the reader), in parentheses."""
        if len(table) < MIN_TEACHERS:
            n = counted(len(table), "teacher")
            return f" (on {n}: a rank correlation needs {MIN_TEACHERS})"
        values = [f"{rank_correlation(table[c], table['p']).r:.2f}{name}"
                  for c, name in columns.items()]
        return f" (Spearman's ρ = {listed(values)})"

    return {
        "teachers": f"{counted(len(s), 'teacher')} at p = "
                    f"{listed([str(v) for v in result.spec.p_values])} "
                    f"({counted(len(result.spec.seeds), 'seed')} each)",
        "similarity": f"{RISE_WORDS[verdict['C5']][0]} with p"
                      f"{rho(s, {'mean similarity': ''})}",
        "r2": f"{RISE_WORDS[verdict['C6']][0]} with p{rho(s, {'R²': ''})}",
        "accuracy": f"{RISE_WORDS[verdict['C7']][1]} with p{up_to}" + rho(
            low, {"teacher acc": " for the teachers", "student acc": " for the Raptors"}),
        "association": f"{ASSOCIATION_WORDS[verdict['C8']]} across the teachers (Pearson's r = "
                       f"{correlation(s['mean similarity'], s['R²']).r:.2f})",
    }
