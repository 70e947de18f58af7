"""Chapter *Scaling Raptor to foundation models*: how much of a foundation model's accuracy do
k = 2, 3, 4 tied blocks keep, and which parts of the recipe matter? Raptors of k = 2, 3, 4 blocks
and the ablation ladder (§3, Tables 1–2, Figs. 7 and 14; C12–C14)."""

from raptor.book.chapters.scaling.spec import NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.scaling import claims, compute, figures  # noqa: F401
