"""What chapter *Your own ViT* finds, as prose (it tests no claim of the paper)."""

from __future__ import annotations

from raptor import phases
from raptor.book.chapters.analyze.compute import Result, model_name
from raptor.book.claims import LEVEL, Claim
from raptor.book.scope import DATASET_NAMES
from raptor.stats import Interval


def findings(result: Result) -> dict[str, str]:
    """What the analysis finds, as text for the chapter's prose."""
    out = {
        "model": model_name(result.spec),
        "images": f"{result.n_images:,} images of "
                  f"{DATASET_NAMES.get(result.spec.images, result.spec.images)}",
        "depth": str(result.depth),
        "cuts": "; ".join(f"k = {k}: {phases.format_partition(c)}" for k, c in result.cuts.items()),
        "excess": "; ".join(f"k = {k}: {Interval(e.excess, e.low, e.high, e.level):+.3f}"
                            for k, e in result.excess.items()),
        "c1": f"{result.test.verdict()}: "
              f"{Interval(result.test.excess, *result.test.interval(), LEVEL):+.3f} at k = "
              f"{result.test.best().k} ({phases.format_partition(result.test.best().cut)}); "
              f"d* (the smallest step it detects with 80% probability) "
              f"{result.test.d_star:.2f}",
        "dinov2b": f"{result.dinov2b_test.excess:+.3f} at k = {result.dinov2b_test.best().k}",
    }
    if result.fits:
        out["raptor"] = "; ".join(
            f"k = {k}: global R² {fits[0].global_r2:.3f}" + (
                f" (random partitions: {min(f.global_r2 for f in fits[1:]):.3f} to "
                f"{max(f.global_r2 for f in fits[1:]):.3f})" if len(fits) > 1 else "")
            for k, fits in result.fits.items())
    else:
        out["raptor"] = "not fitted (set fit_raptor, or --fit-raptor STEPS on the command line)"
    return out


def claims(result: Result) -> list[Claim]:
    """The analysis of one model tests no claim of the paper: its C1 verdict is in
    :func:`~raptor.book.chapters.analyze.figures.table`."""
    return []
