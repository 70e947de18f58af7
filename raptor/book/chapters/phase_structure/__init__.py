"""Chapter *Emergent phase structure*: do a trained ViT's layers organise themselves into a few
contiguous phases? Layer–layer similarity and its blocks (§2, Fig. 1; C1).

The max-cut's block excess over a ladder of nulls (:mod:`raptor.structure`) for every teacher, the
untrained networks, the synthetic controls (:mod:`raptor.controls`) and the paper's DINOv2-B
matrix (:func:`raptor.paper.dinov2b_block_similarity`), the ladder showing why the warped decay is
the null. C1 is judged by :func:`raptor.phase_test.phase_test`: the partition chosen on the
cross-fitted residual over the warped decay at every k of the paper, corrected for the k's tried,
with each model's smallest detectable step d* beside its verdict.
"""

from raptor.book.chapters.phase_structure.spec import NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.phase_structure import claims, compute, figures  # noqa: F401
