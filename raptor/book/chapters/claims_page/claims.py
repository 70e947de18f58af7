"""The claims page's numbers, for the intro (the page tests no claim of its own)."""

from __future__ import annotations

from raptor.book.chapters.claims_page.compute import Result
from raptor.book.claims import (BY_CONSTRUCTION, CLAIMS, FAILS, HOLDS, INCONCLUSIVE, LEVEL,
                                SEEDS_ALPHA, SIDE_ERROR, UNTESTABLE, UNTESTED, Claim, counted)
from raptor.book.engine import ENGINE, POWER

# Glue keys of the verdict counts.
COUNT_KEYS = {HOLDS: "n_holds", FAILS: "n_fails", INCONCLUSIVE: "n_inconclusive",
              UNTESTABLE: "n_untestable", BY_CONSTRUCTION: "n_by_construction",
              UNTESTED: "n_untested"}


def claims(result: Result) -> list[Claim]:
    """The page tests no claim of its own."""
    return []


def coverage(n_claims: int, n_tested: int, n_checks: int) -> str:
    """How many of the paper's claims the book checks, and how often, as a sentence."""
    which = (f"Every one of the paper's {n_claims} claims is" if n_tested == n_claims else
             f"{n_tested} of the paper's {n_claims} claims {'is' if n_tested == 1 else 'are'}")
    how = "once each" if n_checks == n_tested else f"in {counted(n_checks, 'check')}"
    return f"{which} checked here, {how}."


def summary(result: Result) -> dict[str, int | float | str]:
    """The page's numbers, for the intro: checks run, claims tested, a count per verdict, the
    sub-tests behind the verdicts and their error rates (``error_rates``, a sentence)."""
    t = result.table
    checks = t[t["verdict"] != UNTESTED]
    counts = checks["verdict"].value_counts()
    measured = checks[checks["verdict"].isin([HOLDS, FAILS, INCONCLUSIVE])]["tests"]
    out: dict[str, int | float | str] = {
        "n_claims": len(CLAIMS), "n_checks": len(checks),
        "n_tested": checks.index.nunique(), "n_chapters": checks["chapter"].nunique(),
        "profile": ", ".join(sorted(set(checks["profile"]))) or "—",
        "n_subtests": int(measured.sum()), "level": f"{LEVEL:.0%}",
        "side_error": f"{SIDE_ERROR:.1%}", "seeds_alpha": f"{SEEDS_ALPHA.value:g}",
    }
    for verdict, key in COUNT_KEYS.items():
        out[key] = int(counts.get(verdict, 0)) if verdict != UNTESTED else len(CLAIMS) - out["n_tested"]
    out["coverage"] = coverage(out["n_claims"], out["n_tested"], out["n_checks"])
    engine = sorted(set(checks.index[checks["detail"].str.contains(ENGINE, regex=False)]),
                    key=lambda c: int(c[1:]))
    voted = sorted(set(checks.index[checks["detail"].str.contains("binomial test", regex=False)]),
                   key=lambda c: int(c[1:]))
    out["engine_claims"] = ", ".join(engine) or "none"
    out["error_rates"] = (
        "What the error rate controls: a verdict is about ViTs trained this way, the models the "
        "recipe produces, not only the few trained here. "
        f"The {out['n_checks']} verdicts rest on {out['n_subtests']} sub-tests, each a "
        f"{out['level']} two-sided interval read against its threshold. On the claims judged by "
        f"the claims engine ({out['engine_claims']}), the trained model is the unit: each part's "
        "interval is a t interval over the per-seed estimates, so that it carries the spread "
        "between seeds (or, for a correlation across the teachers of a sweep, its interval over "
        "those teachers), and 'holds' and 'does not hold' each err by chance with probability up to "
        f"{out['side_error']} for models trained this way. Before any verdict, a power check: a "
        "part whose interval could not clear its threshold (or fit in its band) at this profile's "
        "seeds or images, even for an effect of the paper's size, is not testable here, with the "
        "seeds or images it would need, and so is a claim about phases on teachers in which C1's "
        "test finds none, its numbers beside; beside each part that does not hold, "
        f"the smallest margin the test detects with {POWER:.0%} power. A comparison whose "
        "interval lies within its indifference band (an order within half a layer) is a tie: "
        "the difference the claim needs is absent. A claim of m parts holds only if every part "
        "holds, an "
        f"intersection–union test whose chance error stays at {out['side_error']} whatever m "
        "(Berger 1982); it does not hold only if some part's interval at level 1 − 5%/m lies "
        "wholly against it (Bonferroni over the parts)."
        + (f" The other claims ({', '.join(voted)}) still combine their seeds by a binomial "
           f"test of the seeds' own verdicts at α = {out['seeds_alpha']}, each verdict on an "
           "interval of evaluation noise alone: that controls the error for the seeds at hand, "
           "not for models trained this way (with seeds spread 10× their evaluation error it "
           "errs up to 38% each way)." if voted else "")
        + " Nothing is corrected across claims.")
    return out
