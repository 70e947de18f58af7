"""Chapter *Are the phases functional?*: are max-cut phases just a pattern in a similarity matrix,
or do they say how the network computes? Max-cut vs random partitions, controls, layer swaps.

§2 of the paper: Raptors on max-cut partitions vs random ones (Fig. 3; C3), layer swaps within
and across phases (Fig. 15; C4), untrained teachers with and without skip branches (C9, C10) and
Raptors of an overfitting run's checkpoints (Fig. 13; C11).
"""

from raptor.book.chapters.functional_phases.spec import NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.functional_phases import claims, compute, figures  # noqa: F401
