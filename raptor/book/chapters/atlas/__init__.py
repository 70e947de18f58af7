"""Chapter *Where do phases appear?*: which small ViTs, trained to convergence, have block
structure beyond a smooth decay of similarity with depth? The atlas, C1's test over small ViTs
(§2, Fig. 1; a map of our own: neither the paper nor the authors' code has one).

The cells (:mod:`raptor.atlas`: depth, width, training-set size, stochastic-depth rate, patch size,
seed) are measured by ``python -m raptor atlas`` and stored in the repository; the chapter trains
nothing. It reads every stored cell, verified against the manifest, measures the max-cut's block
excess over the ladder of nulls (:func:`~raptor.structure.phase_excesses`, the figures), judges
each cell by C1's test (:func:`~raptor.phase_test.phase_test`: the partition chosen on the
cross-fitted residual at every k, corrected for the k's tried, with the cell's smallest detectable
step d*) and sets it beside the paper's DINOv2-B matrix.
"""

from raptor.book.chapters.atlas.spec import NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.atlas import claims, compute, figures  # noqa: F401
