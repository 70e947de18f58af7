"""One engine for the claims: a claim declared once as data, judged the same way everywhere.

A claim is a :class:`Declaration`: its named :class:`Part` s, each an :class:`Estimate` with its
interval at the replication level, a :class:`~raptor.book.claims.Threshold` with its source (the
paper's words or ``[ours]`` and a reason), a side, and where two things are compared an
indifference band (an order within half a layer is a tie). :func:`judge` turns it into a
:class:`~raptor.book.claims.Claim`: the verdict, the correction for the number of parts, the
power check, one plain generated sentence (``ours``) and the numbers beneath it (``detail``).

**The trained model is the unit of replication.** A claim about "ViTs trained this way" is judged
on a t interval over the per-seed estimates (:func:`over_seeds`, ``scipy.stats.t``): each seed's
estimate carries its own evaluation noise, so the spread between seeds carries both, and the
interval's chance error is 2.5% a side for the population of seeds, not for the seeds at hand. A
bootstrap over three seeds has ten distinct resamples and covers far below its level, so the t
interval is the one policy. A statistic computed across trained models (a correlation over the
teachers of a sweep, :func:`correlation_over_models`) already has the model as its unit: its interval is
over them. A claim about one given model (DINOv2-B) has no seeds: its interval is over images
(:func:`of_model`).

**A power check before any verdict.** A part whose interval, at this profile's seeds (or images),
could not clear its threshold (or fit in its band) even were the truth the paper's value, is *not
testable at this profile*, with the seeds (or images) it would need, unless its interval settles
it all the same. Beside every part that does
not hold, the smallest margin past its threshold that the test detects with 80% power (exact
noncentral t, ``scipy.stats.nct``; normal for intervals over images).

**Many parts.** A claim holds if every part holds on its 95% interval (an intersection–union
test, chance error 2.5% whatever the number of parts m, Berger 1982); it does not hold if some
part's interval at level 1 − 5%/m lies wholly against it (Bonferroni), else it is inconclusive.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from scipy import stats as st

from raptor.book.claims import (CLAIMS, FAILS, HOLDS, INCONCLUSIVE, LEVEL, SIDE_ERROR, UNTESTABLE,
                                Claim, Threshold)
from raptor.stats import Interval

TIE = "tie"  # a part's verdict: the two things compared differ by less than the band
POWER = 0.8  # the power at which the smallest detectable effect is reported
MAX_UNITS = 10_000  # the most seeds the power check searches for
ENGINE = "judged by the claims engine"  # in each engine claim's detail; the claims page reads it
EXACT = "exact"  # the unit of a number read as it is (:func:`exact`)
MODEL = "trained model"  # the unit of a correlation across models (:func:`correlation_over_models`)
SEED_POLICY = "the unit is the trained model: a t interval over the per-seed estimates"


@functools.cache
def _t(level: float, df: int) -> float:
    return float(st.t.ppf(0.5 + level / 2, df))


@functools.cache
def _z(level: float) -> float:
    return float(st.norm.ppf(0.5 + level / 2))


@dataclass(frozen=True)
class Estimate:
    """A number at the replication level: per-seed estimates (``unit == "seed"``, a t interval
    over them), one model's 95% interval over ``n`` images (or other units of one model), or a
    correlation over ``n`` trained models (``fisher``: its interval symmetric in Fisher's z,
    ``spread`` the standard error of z × √n). ``pinned``: a fit sat at its bound on some seed, so
    the number is not estimated."""

    value: float
    unit: str
    n: int
    spread: float  # seeds: the sample sd between seeds; images: the standard error x √n
    pinned: bool = False
    values: tuple[float, ...] = ()
    sides: tuple[float, float] | None = None  # one model's interval: its 95% sides, below/above
    fisher: bool = False
    # one model's interval at any level where its maker can give it exactly (a bootstrap's)
    at: Callable[[float], tuple[float, float]] | None = field(default=None, compare=False,
                                                             repr=False)

    def interval(self, level: float = LEVEL) -> Interval:
        """The estimate's two-sided ``level`` interval (infinite on one seed: no spread); one
        model's own interval (:func:`of_model`) keeps its shape, each side scaled by
        ``z(level) / z(95%)``, or as ``at`` gives it; a correlation's is symmetric in Fisher's
        z."""
        if self.at is not None:
            return Interval(self.value, *self.at(level), level)
        if self.fisher and self.spread > 0:
            z, h = _atanh(self.value), _z(level) * self.spread / math.sqrt(self.n)
            return Interval(self.value, math.tanh(z - h), math.tanh(z + h), level)
        if self.sides is None:
            below = above = self.half(level)
        else:
            below, above = (side * _z(level) / _z(LEVEL) for side in self.sides)
        return Interval(self.value, self.value - below, self.value + above, level)

    def half(self, level: float = LEVEL, n: int | None = None) -> float:
        """The interval's half-width at ``level`` with ``n`` units (default: this one's)."""
        n = self.n if n is None else n
        if self.unit == "seed":
            return math.inf if n < 2 else _t(level, n - 1) * self.spread / math.sqrt(n)
        h = _z(level) * self.spread / math.sqrt(n)
        if self.fisher:  # on the correlation's own scale, about its value
            z = _atanh(self.value)
            return (math.tanh(z + h) - math.tanh(z - h)) / 2
        return h

    def needed(self, half: float) -> int | None:
        """The fewest units (seeds or images) whose 95% half-width is below ``half``; ``None``
        for none up to :data:`MAX_UNITS` seeds, or for one seed, whose spread is unknown."""
        if half <= 0 or (self.unit == "seed" and self.n < 2):
            return None
        if self.unit != "seed":
            return max(self.n, math.ceil(self.n * (self.half() / half) ** 2))
        return next((n for n in range(2, MAX_UNITS) if self.half(LEVEL, n) < half), None)

    def detectable(self, edge: float = 0.0, side: str = "above") -> float:
        """The smallest true margin past a threshold (at ``edge``, the claim on its ``side``) that
        this estimate's 95% interval clears with :data:`POWER` (one-sided, the interval's 2.5%
        side): noncentral t over seeds, normal over images, normal in Fisher's z for a
        correlation; ``inf`` on one seed."""
        if self.unit != "seed":
            shift = (_z(LEVEL) + float(st.norm.ppf(POWER))) * self.spread / math.sqrt(self.n)
            if not self.fisher:
                return shift
            sign = 1 if side == "above" else -1
            return sign * (math.tanh(_atanh(edge) + sign * shift) - edge)
        if self.n < 2 or self.spread == 0:
            return math.inf if self.n < 2 else 0.0
        df, crit = self.n - 1, _t(LEVEL, self.n - 1)
        shift = optimize.brentq(lambda d: st.nct.sf(crit, df, d) - POWER, 0.0, 100.0)
        return shift * self.spread / math.sqrt(self.n)

    def unit_text(self) -> str:
        return f"{self.n} {self.unit}{'s' * (self.n != 1)}"


def over_seeds(values: Sequence[float], *, pinned: bool = False) -> Estimate:
    """An estimate from one per seed (each trained model one unit): their mean, judged on the t
    interval of its spread between seeds."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or not len(v) or not np.isfinite(v).all():
        raise ValueError(f"need one finite estimate per seed, got {values!r}")
    sd = float(v.std(ddof=1)) if len(v) > 1 else math.nan
    return Estimate(float(v.mean()), "seed", len(v), sd, pinned, tuple(map(float, v)))


def exact(value: float) -> Estimate:
    """A number without sampling error: a count or an extreme over the seeds (e.g. how far the
    boundaries move across them), read as it is."""
    return Estimate(float(value), EXACT, 1, 0.0)


def of_model(iv: Interval, n: int, unit: str = "image", *,
             at: Callable[[float], tuple[float, float]] | None = None) -> Estimate:
    """An estimate of one given model (no seeds to replicate, e.g. the published DINOv2-B) from
    its interval over ``n`` units (images, or image subsets): the interval keeps its shape (a
    Wilson interval stays inside [0, 1]), or ``at(level)`` gives it at any level (e.g. a
    bootstrap's percentiles); for the power check its wider side is read as normal, standard
    error = side / z."""
    if n < 1 or not iv.low <= iv.high or not 0 < iv.level < 1 or unit in ("seed", MODEL):
        raise ValueError(f"need n >= 1, an interval with low <= high and a unit other than "
                         f"seeds or models, got n={n}, {iv}, {unit!r}")
    centre = min(max(iv.estimate, iv.low), iv.high)  # a bootstrap's estimate may lie outside
    r = _z(LEVEL) / _z(iv.level)
    sides = (r * (centre - iv.low), r * (iv.high - centre))
    return Estimate(centre, unit, n, max(sides) / _z(LEVEL) * math.sqrt(n), sides=sides, at=at)


def correlation_over_models(iv: Interval, n: int) -> Estimate:
    """A correlation over ``n`` trained models, each one unit (e.g. Spearman's ρ of the teachers
    of a sweep with their rate), from its Fisher-z interval (symmetric in z = atanh r): the
    interval at any level, and the power check, are exact on that scale."""
    if n < 4 or not -1 <= iv.low <= iv.estimate <= iv.high <= 1 or not 0 < iv.level < 1:
        raise ValueError(f"need n >= 4 and a correlation inside its interval, got n={n}, {iv}")
    se = (_atanh(iv.high) - _atanh(iv.low)) / (2 * _z(iv.level))
    return Estimate(iv.estimate, MODEL, n, se * math.sqrt(n), fisher=True)


def _atanh(r: float) -> float:
    """Fisher's z, finite at |r| = 1 (a perfect ordering: its interval stays [r, r])."""
    return math.atanh(max(-1 + 1e-12, min(1 - 1e-12, r)))


@dataclass(frozen=True)
class Part:
    """A named part of a claim: ``estimate`` against ``threshold`` on a ``side``.

    ``side``: ``"above"`` / ``"below"`` (the claim says the number exceeds / stays below the
    threshold), or ``"inside"`` (it lies within ``band`` of it: a tie, e.g. accuracy saturates).
    ``band``: an indifference band of half-width ``band`` around the threshold where two things
    are compared; above/below hold only beyond it, a number wholly inside it is a :data:`TIE`.
    ``paper``: the value the paper reports for this number, for the power check. ``fmt``: how
    its numbers print. ``what``: the number in words, for the sentence."""

    name: str
    estimate: Estimate
    threshold: Threshold
    side: str = "above"
    band: float = 0.0
    paper: float | None = None
    fmt: str = ".3f"
    what: str = ""

    def __post_init__(self) -> None:
        if self.side not in ("above", "below", "inside") or self.band < 0 or (
                self.side == "inside" and self.band == 0):
            raise ValueError(f"part {self.name!r}: side must be above / below / inside (inside "
                             f"with a band > 0), band >= 0; got {self.side!r}, {self.band}")

    def read(self, level: float) -> str:
        """The verdict of the interval at ``level`` alone: holds, does not hold, tie or
        inconclusive (a pinned estimate is inconclusive)."""
        if self.estimate.pinned:
            return INCONCLUSIVE
        iv, t, b = self.estimate.interval(level), self.threshold.value, self.band
        inside = t - b <= iv.low and iv.high <= t + b
        if self.side == "inside":
            return HOLDS if inside else FAILS if iv.low > t + b or iv.high < t - b \
                else INCONCLUSIVE
        lo, hi = (iv.low - t, iv.high - t) if self.side == "above" else (t - iv.high, t - iv.low)
        return HOLDS if lo > b else FAILS if hi <= -b else TIE if b and inside else INCONCLUSIVE

    def target(self) -> float | None:
        """The half-width an interval needs to hold were the truth the paper's value (``None``:
        no paper value or the paper's value would not hold itself, so no check)."""
        t, b = self.threshold.value, self.band
        if self.side == "inside":
            return b - abs((t if self.paper is None else self.paper) - t)
        if self.paper is None:
            return None
        return (self.paper - t - b) if self.side == "above" else (t - b - self.paper)

    def testable(self) -> tuple[bool, int | None]:
        """Whether this part's interval could hold at its units for the paper's effect, and the
        units (seeds or images) it would need where it could not."""
        if self.estimate.unit == "seed" and self.estimate.n < 2:
            return False, None
        target = self.target()
        if target is None:
            return True, None
        if target <= 0:
            return False, None
        return self.estimate.half() < target, self.estimate.needed(target)

    def relation(self) -> str:
        t, b, f = self.threshold.value, self.band, self.fmt
        if self.side == "inside":
            return f"between {t - b:{f}} and {t + b:{f}}"
        return f"{self.side} {t:{f}}" + (f" by more than {b:{f}}" if b else "")


@dataclass(frozen=True)
class Declaration:
    """A claim declared once: its ID, the paper's statement of it, its judged ``parts`` and
    ``also`` (parts reported with their own verdict beside the claim, not entering it);
    ``rests_on``: evidence it depends on, shown beside it (e.g. C1's block excess)."""

    id: str
    paper: str
    parts: Sequence[Part]
    also: Sequence[Part] = field(default_factory=tuple)
    rests_on: str = ""
    note: str = ""  # what the numbers are, for the detail

    def __post_init__(self) -> None:
        names = [p.name for p in (*self.parts, *self.also)]
        if self.id not in CLAIMS or not self.parts or len(set(names)) != len(names):
            raise ValueError(f"need a known claim ID and named, distinct parts; got {self.id!r}, "
                             f"{names}")


def fails_level(m: int) -> float:
    """The level of the interval on which a part of a claim of ``m`` parts does not hold."""
    return 1 - 2 * SIDE_ERROR / m


def part_verdicts(parts: Sequence[Part]) -> list[str]:
    """Each part's verdict within a claim of ``len(parts)`` parts: holds on its 95% interval,
    does not hold (or a tie) on its interval at the Bonferroni level; where neither, not testable
    if the power check says it could not have held at this profile, else inconclusive. (A
    significant result stands whatever the power; an unsettled one is told apart from one that
    could never have settled.)"""
    wide = fails_level(len(parts))
    out = []
    for p in parts:
        v = HOLDS if p.read(LEVEL) == HOLDS else p.read(wide)
        out.append(v if v in (HOLDS, FAILS, TIE) else
                   INCONCLUSIVE if p.testable()[0] or p.estimate.pinned else UNTESTABLE)
    return out


def verdict_of(verdicts: Sequence[str]) -> str:
    """A claim's verdict from its parts': does not hold if one does not (or ties where the claim
    is an order); not testable if one is not and none fails; inconclusive if one is; else holds."""
    if FAILS in verdicts or TIE in verdicts:
        return FAILS
    return UNTESTABLE if UNTESTABLE in verdicts else INCONCLUSIVE if INCONCLUSIVE in verdicts \
        else HOLDS


def _clause(p: Part, verdict: str) -> str:
    f, what = p.fmt, p.what or p.name
    est, e = f"{p.estimate.value:{f}}", p.estimate
    if verdict == UNTESTABLE:
        need = p.testable()[1]
        return (f"{what} cannot be tested on {e.unit_text()}"
                + (f" (it needs {need} {e.unit}s)" if need else
                   " (one seed has no spread between seeds)" if e.unit == "seed" and e.n < 2
                   else " (the paper's own value would not clear it)"))
    if e.pinned:
        return f"{what} sits at its fit's bound, so it is not estimated"
    if verdict == HOLDS:
        return f"{what} is {est}, {p.relation()}"
    if verdict == FAILS:
        return f"{what} is {est}, not {p.relation()}"
    if verdict == TIE:
        return f"{what} is {est}, a tie within ±{p.band:{f}}"
    return f"{what} is {est}, not clearly {p.relation()} on {e.unit_text()}"


def sentence(parts: Sequence[Part], verdicts: Sequence[str]) -> str:
    """One plain sentence: what holds, then "but" what does not hold or is not settled."""
    good = [_clause(p, v) for p, v in zip(parts, verdicts) if v == HOLDS]
    bad = [_clause(p, v) for p, v in zip(parts, verdicts) if v != HOLDS]
    text = "; ".join(good) + ("; but " if good and bad else "") + "; ".join(bad)
    return text[:1].upper() + text[1:]


def _numbers(p: Part, verdict: str, level: float) -> str:
    e, f = p.estimate, p.fmt
    iv = e.interval(level)
    shown = f"{e.value:{f}}" + " (one seed)" * (e.unit == "seed") if e.n < 2 else f"{iv:{f}}"
    per_seed = (" (per seed " + ", ".join(f"{v:{f}}" for v in e.values) + ")"
                if e.unit == "seed" and e.n > 1 else "")
    ours = " [ours]" if p.threshold.source.startswith("[ours]") else ""
    text = f"{p.name} {shown}{per_seed} vs {p.relation()}{ours}: {verdict}"
    edge = p.threshold.value + (p.band if p.side == "above" else -p.band)
    if verdict not in (HOLDS, UNTESTABLE) and p.side != "inside" and \
            0 < e.detectable(edge, p.side) < math.inf:
        text += (f"; 80% power to detect a true value {e.detectable(edge, p.side):{f}} "
                 f"{p.side} {edge:{f}}")
    return text


def _policy(unit: str) -> str:
    return {"seed": SEED_POLICY, EXACT: "counts read as they are",
            MODEL: "the unit is the trained model: a Fisher-z interval over the models"
            }.get(unit, f"one given model, its interval over {unit}s")


def judge(d: Declaration) -> Claim:
    """The claim ``d`` judged: its verdict, sentence and numbers."""
    verdicts = part_verdicts(d.parts)
    verdict = verdict_of(verdicts)
    also = [v if v != INCONCLUSIVE or p.testable()[0] or p.estimate.pinned else UNTESTABLE
            for p, v in zip(d.also, (p.read(LEVEL) for p in d.also))]
    m = len(d.parts)
    policies = dict.fromkeys(_policy(p.estimate.unit) for p in (*d.parts, *d.also))
    detail = ((d.note + "; " if d.note else "")
              + "; ".join(_numbers(p, v, LEVEL) for p, v in zip(d.parts, verdicts))
              + (f" (95% intervals; a part does not hold only at the {fails_level(m):.2%} level, "
                 f"Bonferroni over {m} parts)" if m > 1 else " (95% interval)")
              + f"; {ENGINE}: " + ", ".join(policies)
              + ("; also " + "; ".join(_numbers(p, v, LEVEL) for p, v in zip(d.also, also))
                 if d.also else ""))
    ours = sentence(d.parts, verdicts)
    if d.also:
        ours += "; also " + "; ".join(_clause(p, v) for p, v in zip(d.also, also))
    return Claim(d.id, CLAIMS[d.id], d.paper, ours, verdict, detail, d.rests_on, tests=m)
