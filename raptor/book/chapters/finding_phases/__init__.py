"""Chapter *Finding the phases*: where exactly are the phase boundaries, and how much can we trust
them? Exact max-cut vs hierarchical bisection, and stability (App. A.1, Figs. 2–3; C2)."""

from raptor.book.chapters.finding_phases.spec import NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.finding_phases import claims, compute, figures  # noqa: F401
