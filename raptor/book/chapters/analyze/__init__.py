"""Chapter *Your own ViT*: is my model block-structured, and into how many phases? The paper's
analysis of any timm ViT (§2–§4, Figs. 1, 8–12).

``python -m raptor analyze --model NAME --weights FILE --images DIR`` executes this chapter with
those parameters into a folder of its own; the book executes it on one of the companion's own
teachers as an example. One streaming pass over the images (:func:`raptor.analysis.analyse`)
gives the layer-similarity matrices, their max-cut for each k, C1's test with its ladder of
nulls (:func:`~raptor.structure.phase_excess`) set beside the paper's DINOv2-B matrix, and the
flow of §4 (norms, directional convergence, angular speed, coherence, update ranks, DMD). With
``fit_raptor``, a Raptor of k tied blocks is distilled on each max-cut (§3), and on random
partitions when asked, and compared with the model layer by layer.
"""

from raptor.book.chapters.analyze.spec import COMPANION, NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["COMPANION", "NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.analyze import claims, compute, figures  # noqa: F401
