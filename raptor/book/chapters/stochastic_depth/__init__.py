"""Chapter *Stochastic depth and recurrent compressibility*: does training with stochastic depth
make a ViT more block-recurrent? A sweep of uniform rates p (§2, Fig. 4; C5–C8)."""

from raptor.book.chapters.stochastic_depth.spec import NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.stochastic_depth import claims, compute, figures  # noqa: F401
