"""Chapter *Depth as a dynamical system*: if depth repeats a few maps, what does the repeated map
do to the tokens? The teacher's and the Raptor's flow on the sphere (§4, Figs. 8–12; C16–C24)."""

from raptor.book.chapters.dynamics.spec import NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.dynamics import claims, compute, figures  # noqa: F401
