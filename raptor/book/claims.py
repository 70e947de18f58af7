"""Claims as code: each chapter tests the paper's claims on its own result.

The paper's 25 checkable claims have stable IDs C1–C25 (:data:`CLAIMS`). A chapter's claim is a
named function of its result with named :class:`Threshold` s; it returns a :class:`Claim`: the
paper's number, this run's number and a verdict (:data:`VERDICTS`): ``holds`` / ``does not hold``,
``inconclusive`` when the number's interval spans the threshold (:func:`versus`), ``not testable
at this profile``, or ``by construction`` for a property the model has by design, not by
measurement. Chapters write their claims as JSON next to the book; the claims page gathers them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from raptor.structure import PhaseExcess

CLAIMS: dict[str, str] = {
    "C1": "Layer–layer similarity matrices show contiguous block structure across models",
    "C2": "Max-cut boundaries align with the visible blocks",
    "C3": "Max-cut partitions beat random partitions by > 1σ of Raptor accuracy",
    "C4": "Intra-block layer swaps keep accuracy; inter-block swaps collapse it",
    "C5": "Stochastic depth raises layer–layer similarity",
    "C6": "Stochastic depth raises Raptor reconstruction R²",
    "C7": "Stochastic depth raises teacher and student accuracy (up to ~0.6)",
    "C8": "Layer–layer similarity is positively associated with Raptor R²",
    "C9": "An untrained ViT is reconstructed better than a trained one",
    "C10": "Removing the skip branch of an untrained ViT only slightly lowers R²",
    "C11": "R² stays high until the teacher overfits, then cls R² and accuracy drop",
    "C12": "Raptor k=2 recovers ~96% of DINOv2-B IN-1k accuracy, k=3 ~98%",
    "C13": "Accuracy rises from k=2 to k=3 and saturates at k=4",
    "C14": "TF alone collapses; AR with annealed TF recovers; each later step adds",
    "C15": "Raptor keeps high cosine similarity to the teacher through depth",
    "C16": "Token directions converge: γ_l is S-shaped and saturates near 1",
    "C17": "Feature norms grow with depth",
    "C18": "Depth trajectories enter class-dependent angular basins",
    "C19": "Perturbed trajectories bend back (self-correction)",
    "C20": "Patch sensitivity decays with injection depth; cls sensitivity rises when injected late",
    "C21": "Angular speed: registers < patches < cls late; statistics jump at phase boundaries",
    "C22": "Stable and effective rank of updates fall with depth (≈ 6 at the end for DINOv2-B)",
    "C23": "Patch-token coherence rises sharply late",
    "C24": "DMD eigenvalues lie inside the unit circle near +1; cls closest to +1",
    "C25": "A BRH model has a shorter description at the same runtime (Levin complexity)",
}

HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
UNTESTABLE, BY_CONSTRUCTION = "not testable at this profile", "by construction"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, UNTESTABLE, BY_CONSTRUCTION)
UNTESTED = "not yet tested"  # on the claims page: no chapter has checked the claim


@dataclass(frozen=True)
class Threshold:
    """A number a verdict compares against, and where it comes from.

    ``source`` quotes the paper (section, figure or table) or starts with ``[ours]`` and gives
    the reason.
    """

    value: float
    source: str

    def __post_init__(self) -> None:
        if not self.source.strip():
            raise ValueError("a threshold needs a source: the paper's words or '[ours] <reason>'")


@dataclass(frozen=True)
class Claim:
    """One claim tested in one chapter at one profile."""

    id: str
    claim: str
    paper: str
    ours: str
    verdict: str
    detail: str = ""
    chapter: str = ""
    profile: str = ""


def claim(claim_id: str, *, paper: str, ours: str, holds: bool | str | None,
          detail: str = "") -> Claim:
    """A claim ``claim_id`` tested: ``holds`` is a bool, one of :data:`VERDICTS` (e.g. from
    :func:`versus`), or ``None`` for not testable at this profile."""
    if claim_id not in CLAIMS:
        raise ValueError(f"unknown claim id {claim_id!r}; valid: C1..C{len(CLAIMS)}")
    if isinstance(holds, str):
        if holds not in VERDICTS:
            raise ValueError(f"unknown verdict {holds!r}; valid: {', '.join(VERDICTS)}")
        verdict = holds
    else:
        verdict = UNTESTABLE if holds is None else HOLDS if bool(holds) else FAILS
    return Claim(claim_id, CLAIMS[claim_id], paper, ours, verdict, detail)


def versus(low: float, high: float, threshold: float, *, above: bool = True) -> str:
    """The verdict of "the number exceeds ``threshold``" (``above=False``: stays below it) from
    its interval ``[low, high]``: ``holds`` / ``does not hold`` when the whole interval lies on
    one side, ``inconclusive`` when it spans the threshold."""
    if not low <= high:
        raise ValueError(f"need an interval with low <= high, got [{low}, {high}]")
    lo, hi = (low, high) if above else (-high, -low)
    t = threshold if above else -threshold
    return HOLDS if lo > t else FAILS if hi <= t else INCONCLUSIVE


def all_of(verdicts: Iterable[str]) -> str:
    """A conjunction of sub-verdicts: fails if any fails, else inconclusive if any is, else
    holds."""
    vs = list(verdicts)
    if not vs or any(v not in (HOLDS, FAILS, INCONCLUSIVE) for v in vs):
        raise ValueError(f"need holds / does not hold / inconclusive verdicts, got {vs}")
    return FAILS if FAILS in vs else INCONCLUSIVE if INCONCLUSIVE in vs else HOLDS


def across_seeds(per_seed: Mapping[int, Claim]) -> Claim:
    """One claim tested on the models of several seeds (``{seed: claim}``): as :func:`all_of`,
    it holds only if it holds for every seed and does not hold if it fails for any. The first
    seed's numbers are shown, every seed's verdict beside them and the others' numbers in the
    detail. A claim not testable (or true by construction) for every seed stays so."""
    if not per_seed or len({c.id for c in per_seed.values()}) != 1:
        raise ValueError(f"need one claim ID over ≥ 1 seed, got "
                         f"{sorted({c.id for c in per_seed.values()})}")
    (s0, first), *rest = per_seed.items()
    if not rest:
        return first
    verdicts = [c.verdict for c in per_seed.values()]
    empirical = (HOLDS, FAILS, INCONCLUSIVE)
    verdict = all_of(verdicts) if all(v in empirical for v in verdicts) else \
        verdicts[0] if len(set(verdicts)) == 1 else INCONCLUSIVE
    return replace(
        first, verdict=verdict,
        ours=f"seed {s0}: {first.ours} (per seed: "
             + ", ".join(f"{s} {c.verdict}" for s, c in per_seed.items()) + ")",
        detail=f"{first.detail}; {len(per_seed)} teacher seeds, each with its own models; holds "
               f"only if it holds for every seed; "
               + "; ".join(f"seed {s}: {c.ours}" for s, c in rest))


EXCESS_MIN = Threshold(0.01, "[ours] the paper shows blocks by eye (Fig. 1) without a test; "
                             "0.01 of mean cosine similarity is 1% of the similarity colour scale, "
                             "the least a block must stand out from the depth decay to be seen")


def on_phases(c: Claim, excess: Mapping[str, PhaseExcess]) -> Claim:
    """A claim that rests on phases (C2–C4, C21), as measured where every teacher's max-cut has
    block excess (C1 holds for it), and *inconclusive* otherwise: its cut is then what a smooth
    decay of similarity with depth gives, not a phase structure, and the test says nothing."""
    if all(versus(e.low, e.high, EXCESS_MIN.value) == HOLDS for e in excess.values()) \
            or c.verdict not in (HOLDS, FAILS):
        return c
    shown = ", ".join(f"{name} {e.excess:+.3f} [{e.low:+.3f}, {e.high:+.3f}]"
                      for name, e in excess.items())
    return replace(
        c, verdict=INCONCLUSIVE,
        detail=f"{c.detail}; measured '{c.verdict}', set aside: the cut is not a phase structure "
               f"(block excess {shown}; C1 needs > {EXCESS_MIN.value})")


class ClaimTable(pd.DataFrame):
    """A chapter's claims table; in a notebook each ID links to its claim on the claims page."""

    @property
    def _constructor(self) -> type[ClaimTable]:
        return ClaimTable

    def _repr_html_(self) -> str | None:
        html = super()._repr_html_()
        for cid in dict.fromkeys(self.index) if html else ():
            html = html.replace(f"<th>{cid}</th>",
                                f'<th><a href="../claims.html#{cid}">{cid}</a></th>')
        return html


def table(claims: Iterable[Claim]) -> ClaimTable:
    """The claims as a table (the last cell of a chapter)."""
    rows = [asdict(c) for c in claims]
    cols = ["id", "claim", "paper", "ours", "verdict", "detail"]
    frame = pd.DataFrame(rows, columns=cols + ["chapter", "profile"])[cols].set_index("id")
    return ClaimTable(frame)


def report(claims: Iterable[Claim], *, chapter: str, profile: str,
           claims_dir: str | Path = "claims") -> pd.DataFrame:
    """Write the chapter's claims to ``claims_dir/<chapter>.json`` and return them as a table.

    Also lifts pandas' column-width limit so the table shows each claim in full.
    """
    pd.set_option("display.max_colwidth", None)
    checks = [Claim(**{**asdict(c), "chapter": chapter, "profile": profile}) for c in claims]
    path = Path(claims_dir) / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([asdict(c) for c in checks], indent=1, ensure_ascii=False) + "\n")
    return table(checks)


def gather(claims_dir: str | Path = "claims") -> pd.DataFrame:
    """All 25 claims with every check recorded for them in ``claims_dir``; untested ones are
    marked so."""
    found: dict[str, list[dict]] = {cid: [] for cid in CLAIMS}
    for path in sorted(Path(claims_dir).glob("*.json")):
        for c in json.loads(path.read_text()):
            found[c["id"]].append(c)
    rows = []
    for cid, statement in CLAIMS.items():
        for c in found[cid] or [None]:
            rows.append({"id": cid, "claim": statement,
                         "chapter": c["chapter"] if c else "—",
                         "profile": c["profile"] if c else "—",
                         "paper": c["paper"] if c else "",
                         "ours": c["ours"] if c else "",
                         "detail": c.get("detail", "") if c else "",
                         "verdict": c["verdict"] if c else UNTESTED})
    return pd.DataFrame(rows).set_index("id")
