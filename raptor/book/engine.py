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
could not clear its threshold (or fit in its band) even were the truth the paper's value, or whose
smallest detectable effect lies beyond the quantity's range (a share past 1, a correlation past
±1), is *not testable here*, with the seeds (or images) it would need, unless its
interval settles it all the same. Beside every part that does not hold, the smallest true value
that the test detects with 80% power at its seeds (or images), in the quantity's units, and its
margin past the bar: "with 3 seeds, 80% power only for a true value of 0.58 or more (0.31 above
the bar 0.27)" (exact noncentral t, ``scipy.stats.nct``; normal for intervals over images), its
spread at least the seeds' evaluation noise where the chapter gives it (seeds that agree exactly
still carry it).

**Bounded quantities stay in their range.** A share, a correlation or a layer offset declares its
range (``bounds``); over seeds its t interval and power line are built on the logit of its place
in the range (Fisher's z for a correlation) and mapped back, and the range is printed beside it.

**Many parts.** A claim holds if every part holds on its 95% interval (an intersection–union
test, chance error 2.5% whatever the number of parts m, Berger 1982); it does not hold if some
part's interval at level 1 − 5%/m lies wholly against it (Bonferroni), else it is inconclusive
(not testable where every unsettled part could not have settled; a part whose 95% interval lies
against the claim, short of the Bonferroni level, says so).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special
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
    ``spread`` the standard error of z × √n).

    ``bounds``: the range of a bounded quantity (a share, a correlation, a layer offset). Over
    seeds its t interval, and every power check, are built on the logit of the value's place in
    the range (for a correlation, Fisher's z) and mapped back, so no interval or detectable value
    leaves the range; the logit is widened by half a ``step`` (the quantity's resolution, e.g. 1/m
    for a share of m: the empirical logit) so that a value at a bound stays finite. ``noise``:
    the evaluation noise of one seed's estimate (its standard error over images), the least
    spread the power check assumes: seeds that agree exactly still differ by it."""

    value: float
    unit: str
    n: int
    spread: float  # seeds: the sample sd between seeds (on the logit scale where bounded)
    values: tuple[float, ...] = ()
    sides: tuple[float, float] | None = None  # one model's interval: its 95% sides, below/above
    fisher: bool = False
    # one model's interval at any level where its maker can give it exactly (a bootstrap's)
    at: Callable[[float], tuple[float, float]] | None = field(default=None, compare=False,
                                                             repr=False)
    bounds: tuple[float, float] | None = None
    step: float = 0.0
    noise: float = 0.0  # on the scale of ``spread``

    @property
    def logit(self) -> bool:
        """Whether the t interval and the power check work on the logit scale of ``bounds``."""
        return self.unit == "seed" and self.bounds is not None

    def scale(self, v: float) -> float:
        """``v`` on the scale the interval is built on over seeds where bounded: the logit of its
        place in ``bounds`` widened by half a ``step`` each side, ``log((v − lo + step/2) /
        (hi − v + step/2))`` (a share's empirical logit; a value at a bound stays finite);
        else as it is."""
        if not self.logit:
            return v
        lo, hi = self.bounds
        below, above = v - lo + self.step / 2, hi - v + self.step / 2
        return math.log(below / above) if below > 0 and above > 0 else \
            math.copysign(math.inf, below - above)

    def unscale(self, z: float) -> float:
        """The inverse of :meth:`scale` (beyond a bound by less than half a step at most)."""
        if not self.logit:
            return z
        lo, hi = self.bounds
        return lo - self.step / 2 + (hi - lo + self.step) * float(special.expit(z))

    def interval(self, level: float = LEVEL) -> Interval:
        """The estimate's two-sided ``level`` interval (infinite on one seed: no spread); one
        model's own interval (:func:`of_model`) keeps its shape, each side scaled by
        ``z(level) / z(95%)``, or as ``at`` gives it; a correlation's is symmetric in Fisher's
        z; a bounded one's over seeds symmetric on its logit scale."""
        if self.at is not None:
            return Interval(self.value, *self.at(level), level)
        if self.fisher and self.spread > 0:
            z, h = _atanh(self.value), _z(level) * self.spread / math.sqrt(self.n)
            return Interval(self.value, math.tanh(z - h), math.tanh(z + h), level)
        if self.logit:  # an end past a bound (by half a step at most) is the bound
            z, h = self.scale(self.value), self.half(level)
            lo, hi = self.bounds
            return Interval(self.value, max(lo, self.unscale(z - h)),
                            min(hi, self.unscale(z + h)), level)
        if self.sides is None:
            below = above = self.half(level)
        else:
            below, above = (side * _z(level) / _z(LEVEL) for side in self.sides)
        return Interval(self.value, self.value - below, self.value + above, level)

    def half(self, level: float = LEVEL, n: int | None = None, *, power: bool = False) -> float:
        """The interval's half-width at ``level`` with ``n`` units (default: this one's), on the
        logit scale where bounded over seeds; ``power``: with the spread floored at ``noise``."""
        n = self.n if n is None else n
        spread = max(self.spread, self.noise) if power else self.spread
        if self.unit == "seed":
            return math.inf if n < 2 else _t(level, n - 1) * spread / math.sqrt(n)
        h = _z(level) * spread / math.sqrt(n)
        if self.fisher:  # on the correlation's own scale, about its value
            z = _atanh(self.value)
            return (math.tanh(z + h) - math.tanh(z - h)) / 2
        return h

    def needed(self, half: float) -> int | None:
        """The fewest units (seeds or images) whose 95% half-width (for the power check) is below
        ``half``; ``None`` for none up to :data:`MAX_UNITS` seeds, or for one seed, whose spread
        is unknown."""
        if half <= 0 or (self.unit == "seed" and self.n < 2):
            return None
        if self.unit != "seed":
            return max(self.n, math.ceil(self.n * (self.half(power=True) / half) ** 2))
        return next((n for n in range(2, MAX_UNITS) if self.half(LEVEL, n, power=True) < half),
                    None)

    def _shift(self, n: int) -> float:
        """The true margin past a threshold, on the interval's scale (Fisher's z for a
        correlation), that ``n`` units' 95% interval clears with :data:`POWER` (one-sided, its
        2.5% side): noncentral t over seeds, normal otherwise; ``inf`` on one seed."""
        spread = max(self.spread, self.noise)
        if self.unit != "seed":
            return (_z(LEVEL) + float(st.norm.ppf(POWER))) * spread / math.sqrt(n)
        if n < 2:
            return math.inf
        if spread == 0:
            return 0.0
        df, crit = n - 1, _t(LEVEL, n - 1)
        shift = optimize.brentq(lambda d: st.nct.sf(crit, df, d) - POWER, 0.0, 100.0)
        return shift * spread / math.sqrt(n)

    def _reach(self, edge: float, side: str, n: int) -> float:
        """The true value that ``n`` units detect with :data:`POWER` past ``edge`` on ``side``."""
        sign = 1 if side == "above" else -1
        if self.fisher:
            return math.tanh(_atanh(edge) + sign * self._shift(n))
        return self.unscale(self.scale(edge) + sign * self._shift(n))

    def detectable(self, edge: float = 0.0, side: str = "above") -> float:
        """The smallest true margin past a threshold (at ``edge``, the claim on its ``side``) that
        this estimate's 95% interval clears with :data:`POWER`, on the interval's scale (so a
        bounded quantity's stays in its range); ``inf`` on one seed."""
        return abs(self._reach(edge, side, self.n) - edge)

    def attainable(self, value: float) -> bool:
        """Whether ``value`` lies in the quantity's range."""
        if self.bounds is None or math.isnan(value):
            return not math.isnan(value)
        return self.bounds[0] <= value <= self.bounds[1]

    def in_reach(self, edge: float, side: str) -> tuple[bool, int | None]:
        """Whether the power check's detectable value past ``edge`` lies in the quantity's range
        at this estimate's units, and if not the fewest units at which it would."""
        if self.attainable(self._reach(edge, side, self.n)):
            return True, None
        ns = range(self.n + 1, MAX_UNITS) if self.unit == "seed" else \
            (self.n * 2 ** i for i in range(1, 40))
        return False, next((n for n in ns if self.attainable(self._reach(edge, side, n))), None)

    def unit_text(self) -> str:
        return f"{self.n:,} {self.unit}{'s' * (self.n != 1)}"


def over_seeds(values: Sequence[float], *, bounds: tuple[float, float] | None = None,
               step: float = 0.0, noise: Sequence[float] | None = None) -> Estimate:
    """An estimate from one per seed (each trained model one unit): their mean, judged on the t
    interval of its spread between seeds. ``bounds``: a bounded quantity's range, the mean and
    interval taken on its logit scale widened by half a ``step`` (:class:`Estimate`); ``noise``:
    each seed's standard error over its images, the floor of the spread in the power check."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or not len(v) or not np.isfinite(v).all():
        raise ValueError(f"need one finite estimate per seed, got {values!r}")
    if bounds is not None and (not bounds[0] < bounds[1] or step < 0 or (
            step == 0 and ((v <= bounds[0]) | (v >= bounds[1])).any())
            or ((v < bounds[0]) | (v > bounds[1])).any()):
        raise ValueError(f"need values in bounds {bounds} (strictly inside without a step > 0), "
                         f"got {values!r}, step {step}")
    shape = Estimate(0.0, "seed", len(v), 0.0, bounds=bounds, step=step)
    z = np.array([shape.scale(x) for x in v])
    sd = float(z.std(ddof=1)) if len(v) > 1 else math.nan
    mean = shape.unscale(float(z.mean()))
    se = 0.0 if noise is None else float(np.sqrt(np.mean(np.square(noise))))
    if bounds is not None and se:  # the delta method onto the logit scale, at the mean
        lo, hi = bounds
        se *= 1 / (mean - lo + step / 2) + 1 / (hi - mean + step / 2)
    return Estimate(mean, "seed", len(v), sd, tuple(map(float, v)), bounds=bounds, step=step,
                    noise=se)


def exact(value: float) -> Estimate:
    """A number without sampling error: a count or an extreme over the seeds (e.g. how far the
    boundaries move across them), read as it is."""
    return Estimate(float(value), EXACT, 1, 0.0)


def of_model(iv: Interval, n: int, unit: str = "image", *,
             at: Callable[[float], tuple[float, float]] | None = None,
             bounds: tuple[float, float] | None = None) -> Estimate:
    """An estimate of one given model (no seeds to replicate, e.g. the published DINOv2-B) from
    its interval over ``n`` units (images, or image subsets): the interval keeps its shape (a
    Wilson interval stays inside [0, 1]), or ``at(level)`` gives it at any level (e.g. a
    bootstrap's percentiles); for the power check its wider side is read as normal, standard
    error = side / z, and a detectable value beyond ``bounds`` (the quantity's range) makes the
    part not testable."""
    if n < 1 or not iv.low <= iv.high or not 0 < iv.level < 1 or unit in ("seed", MODEL):
        raise ValueError(f"need n >= 1, an interval with low <= high and a unit other than "
                         f"seeds or models, got n={n}, {iv}, {unit!r}")
    centre = min(max(iv.estimate, iv.low), iv.high)  # a bootstrap's estimate may lie outside
    r = _z(LEVEL) / _z(iv.level)
    sides = (r * (centre - iv.low), r * (iv.high - centre))
    return Estimate(centre, unit, n, max(sides) / _z(LEVEL) * math.sqrt(n), sides=sides, at=at,
                    bounds=bounds)


def correlation_over_models(iv: Interval, n: int) -> Estimate:
    """A correlation over ``n`` trained models, each one unit (e.g. Spearman's ρ of the teachers
    of a sweep with their rate), from its Fisher-z interval (symmetric in z = atanh r): the
    interval at any level, and the power check, are exact on that scale."""
    if n < 4 or not -1 <= iv.low <= iv.estimate <= iv.high <= 1 or not 0 < iv.level < 1:
        raise ValueError(f"need n >= 4 and a correlation inside its interval, got n={n}, {iv}")
    se = (_atanh(iv.high) - _atanh(iv.low)) / (2 * _z(iv.level))
    return Estimate(iv.estimate, MODEL, n, se * math.sqrt(n), fisher=True, bounds=(-1.0, 1.0))


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
        inconclusive."""
        iv, t, b = self.estimate.interval(level), self.threshold.value, self.band
        inside = t - b <= iv.low and iv.high <= t + b
        if self.side == "inside":
            return HOLDS if inside else FAILS if iv.low > t + b or iv.high < t - b \
                else INCONCLUSIVE
        lo, hi = (iv.low - t, iv.high - t) if self.side == "above" else (t - iv.high, t - iv.low)
        return HOLDS if lo > b else FAILS if hi <= -b else TIE if b and inside else INCONCLUSIVE

    @property
    def edge(self) -> float:
        """The number the claim's side must clear: the threshold moved out by the band."""
        return self.threshold.value + (self.band if self.side == "above" else -self.band)

    def target(self) -> float | None:
        """The half-width an interval needs to hold were the truth the paper's value, on the
        interval's scale (``None``: no paper value or the paper's value would not hold itself,
        so no check)."""
        t, b, g = self.threshold.value, self.band, self.estimate.scale
        if self.side == "inside":
            v = g(t if self.paper is None else self.paper)
            return min(g(t + b) - v, v - g(t - b))
        if self.paper is None:
            return None
        return (g(self.paper) - g(self.edge)) if self.side == "above" else \
            (g(self.edge) - g(self.paper))

    def possible(self) -> bool:
        """Whether some value in the quantity's range clears the part's edge (a share cannot
        exceed 1: "above 1" is no test)."""
        b = self.estimate.bounds
        return b is None or self.side == "inside" or b[0] < self.edge < b[1]

    def testable(self) -> tuple[bool, int | None]:
        """Whether this part's interval could hold at its units: for the paper's effect where
        the paper gives one, and where the claim has a side, with its detectable effect inside
        the quantity's range (a power line past a share's 1 or a correlation's ±1 says the test
        cannot settle it); where not, the units (seeds or images) it would need."""
        e = self.estimate
        if (e.unit == "seed" and e.n < 2) or not self.possible():
            return False, None
        target = self.target()
        if target is not None and target <= 0:
            return False, None
        if target is not None and e.half(power=True) >= target:
            return False, e.needed(target)
        if self.side == "inside":
            return True, None
        return e.in_reach(self.edge, self.side)

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
        if not p.possible():
            out.append(UNTESTABLE)
            continue
        v = HOLDS if p.read(LEVEL) == HOLDS else p.read(wide)
        out.append(v if v in (HOLDS, FAILS, TIE) else
                   INCONCLUSIVE if p.testable()[0] else UNTESTABLE)
    return out


def verdict_of(verdicts: Sequence[str]) -> str:
    """A claim's verdict from its parts': does not hold if one does not (or ties where the claim
    is an order); inconclusive if one is testable yet unsettled; not testable if the only
    unsettled ones could not have settled at this profile; else holds. (An unsettled part this
    profile could settle outranks one it could not: its interval says something.)"""
    if FAILS in verdicts or TIE in verdicts:
        return FAILS
    return INCONCLUSIVE if INCONCLUSIVE in verdicts else UNTESTABLE if UNTESTABLE in verdicts \
        else HOLDS


def _against(p: Part, verdict: str, m: int) -> bool:
    """An unsettled part of ``m`` whose 95% interval lies wholly against the claim, though its
    interval at the Bonferroni level does not."""
    return verdict in (INCONCLUSIVE, UNTESTABLE) and m > 1 and p.read(LEVEL) in (FAILS, TIE)


def _clause(p: Part, verdict: str, m: int = 1) -> str:
    f, what = p.fmt, p.what or p.name
    est, e = f"{p.estimate.value:{f}}", p.estimate
    if _against(p, verdict, m):
        return (f"{what} is {est}, not {p.relation()} on its 95% interval, yet not wholly "
                f"against it at the {fails_level(m):.2%} level that {m} parts need")
    if verdict == UNTESTABLE:
        need = p.testable()[1]
        return (f"{what} cannot be tested on {e.unit_text()}"
                + (f" (it needs {need} {e.unit}s)" if need else
                   " (one seed has no spread between seeds)" if e.unit == "seed" and e.n < 2
                   else " (no value in its range clears it)" if not p.possible()
                   else " (the paper's own value would not clear it)" if p.paper is not None
                   else f" (no {e.unit} count up to {MAX_UNITS:,} would detect it inside its "
                        "range)"))
    if verdict == HOLDS:
        return f"{what} is {est}, {p.relation()}"
    if verdict == FAILS:
        return f"{what} is {est}, not {p.relation()}"
    if verdict == TIE:
        return f"{what} is {est}, a tie within ±{p.band:{f}}"
    return f"{what} is {est}, not clearly {p.relation()} on {e.unit_text()}"


def sentence(parts: Sequence[Part], verdicts: Sequence[str]) -> str:
    """One plain sentence: what holds, then "but" what does not hold or is not settled."""
    m = len(parts)
    good = [_clause(p, v, m) for p, v in zip(parts, verdicts) if v == HOLDS]
    bad = [_clause(p, v, m) for p, v in zip(parts, verdicts) if v != HOLDS]
    text = "; ".join(good) + ("; but " if good and bad else "") + "; ".join(bad)
    return text[:1].upper() + text[1:]


def _numbers(p: Part, verdict: str, m: int = 1) -> str:
    e, f = p.estimate, p.fmt
    iv = e.interval(LEVEL)
    shown = f"{e.value:{f}}" + " (one seed)" * (e.unit == "seed") if e.n < 2 else f"{iv:{f}}"
    if e.bounds is not None:
        shown += f" on [{e.bounds[0]:{f}}, {e.bounds[1]:{f}}]"
    per_seed = (" (per seed " + ", ".join(f"{v:{f}}" for v in e.values) + ")"
                if e.unit == "seed" and e.n > 1 else "")
    ours = " [ours]" if p.threshold.source.startswith("[ours]") else ""
    against = " (against it on its 95% interval)" if _against(p, verdict, m) else ""
    text = f"{p.name} {shown}{per_seed} vs {p.relation()}{ours}: {verdict}{against}"
    if verdict == UNTESTABLE and p.testable()[1]:
        text += f" (it needs {p.testable()[1]} {e.unit}s)"
    if verdict in (HOLDS, UNTESTABLE) or p.side == "inside" or \
            not 0 < e.detectable(p.edge, p.side) < math.inf:
        return text
    reach, need = e.in_reach(p.edge, p.side)
    if not reach:
        return text + (f"; 80% power only past its range (it needs {need} {e.unit}s)" if need
                       else "; 80% power only past its range")
    margin = e.detectable(p.edge, p.side)  # a distance: printed unsigned
    value, more = (p.edge + margin, "more") if p.side == "above" else (p.edge - margin, "less")
    return text + (f"; with {e.unit_text()}, 80% power only for a true value of {value:{f}} or "
                   f"{more} ({margin:{f.replace('+', '')}} {p.side} the bar {p.edge:{f}})")


def _policy(e: Estimate) -> str:
    if e.logit:
        return SEED_POLICY + " on the logit scale of the quantity's range"
    return {"seed": SEED_POLICY, EXACT: "counts read as they are",
            MODEL: "the unit is the trained model: a Fisher-z interval over the models"
            }.get(e.unit, f"one given model, its interval over {e.unit}s")


def judge(d: Declaration) -> Claim:
    """The claim ``d`` judged: its verdict, sentence and numbers."""
    verdicts = part_verdicts(d.parts)
    verdict = verdict_of(verdicts)
    also = [UNTESTABLE if not p.possible() else
            v if v != INCONCLUSIVE or p.testable()[0] else UNTESTABLE
            for p, v in zip(d.also, (p.read(LEVEL) for p in d.also))]
    m = len(d.parts)
    policies = dict.fromkeys(_policy(p.estimate) for p in (*d.parts, *d.also))
    detail = ((d.note + "; " if d.note else "")
              + "; ".join(_numbers(p, v, m) for p, v in zip(d.parts, verdicts))
              + (f" (95% intervals; a part does not hold only at the {fails_level(m):.2%} level, "
                 f"Bonferroni over {m} parts)" if m > 1 else " (95% interval)")
              + f"; {ENGINE}: " + ", ".join(policies)
              + ("; also " + "; ".join(_numbers(p, v) for p, v in zip(d.also, also))
                 if d.also else ""))
    ours = sentence(d.parts, verdicts)
    if d.also:
        ours += "; also " + "; ".join(_clause(p, v) for p, v in zip(d.also, also))
    return Claim(d.id, CLAIMS[d.id], d.paper, ours, verdict, detail, d.rests_on, tests=m)
