"""Chapter *Raptor*: if a ViT's layers fall into k phases, can k weight-tied blocks, each applied
n_j times, reproduce the teacher's whole internal trajectory, not just its output? Two-stage
distillation of a teacher into k weight-tied blocks (§3, Figs. 5, 6, 14; App. E; C15, C25)."""

from raptor.book.chapters.distillation.spec import NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.distillation import claims, compute, figures  # noqa: F401
