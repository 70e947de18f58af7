"""The claims page: what did the book find on each of the paper's 25 claims? Every chapter's
verdicts, gathered.

The page is rendered as HTML (:func:`~raptor.book.chapters.claims_page.figures.page`): the verdict
counts first, then one line per claim, grouped by the chapter that tests it, with a badge (symbol,
word and colour) for the verdict, the paper's value beside ours and the details folded, styled by
the book's ``_static/raptor.css``. :func:`~raptor.book.chapters.claims_page.claims.summary` gives
the numbers the intro quotes (glued, not typed).
"""

from raptor.book.chapters.claims_page.spec import NAME, NOTEBOOK, PAPER, SMOKE, Spec

__all__ = ["NAME", "NOTEBOOK", "PAPER", "SMOKE", "Spec"]


def science() -> None:
    """Import the chapter's science (torch): its ``compute``, ``claims`` and ``figures``."""
    from raptor.book.chapters.claims_page import claims, compute, figures  # noqa: F401
