"""The bibliography's labels in the text's own form, author–year ("Jacobs et al., 2026"), not
pybtex's alphabetic "[JFH+26]": a label style and the formatting style that uses it
(``bibtex_default_style: author_year`` in ``_config.yml``), and citations in the text that
carry the label's year, letter included ("Jacobs et al., 2026a" for the paper, "2026b" for its
code: ``bibtex_reference_style: author_year_label``)."""

from __future__ import annotations

from dataclasses import dataclass

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as Unsrt
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.template import Node, node
from sphinxcontrib.bibtex.plugin import register_plugin as register_referencing
from sphinxcontrib.bibtex.style.referencing import author_year as cited
from sphinxcontrib.bibtex.style.template import year


def _surname(person) -> str:
    """The surname as plain text (``Timoth{\\'e}e`` -> ``Timothée``)."""
    name = " ".join(person.last_names) or " ".join(person.first_names)
    return Text.from_latex(name).render_as("text")


class AuthorYearLabels(BaseLabelStyle):
    """``Surname, year``, ``A and B, year`` or ``A et al., year``; works that would share a
    label get a letter after the year (``2026a``, ``2026b``)."""

    def format_labels(self, sorted_entries):
        labels = []
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            names = [_surname(p) for p in people]
            who = (names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2
                   else f"{names[0]} et al." if names else entry.fields.get("title", entry.key))
            labels.append(f"{who}, {entry.fields.get('year', 'n.d.')}")
        seen: dict[str, int] = {}
        for label in labels:
            if labels.count(label) > 1:
                seen[label] = seen.get(label, -1) + 1
                label += "abcdefghijklmnopqrstuvwxyz"[seen[label]]
            yield label


class AuthorYearStyle(Unsrt):
    default_label_style = "author_year"
    default_sorting_style = "author_year_title"


@node
def label_year(children, data) -> Text:
    """The year as the entry's label writes it, with its letter (``2026a``)."""
    return Text(data["formatted_entry"].label.rsplit(", ", 1)[-1])


def _label_years(template):
    """``template`` with each year node replaced by :func:`label_year`."""
    if isinstance(template, Node):
        template.children = [label_year if child is year else _label_years(child)
                             for child in template.children]
    return template


@dataclass
class AuthorYearLabelReferences(cited.AuthorYearReferenceStyle):
    """sphinxcontrib-bibtex's author–year citations, their years read from the labels."""

    def inner(self, role_name):
        return _label_years(super().inner(role_name))


def setup(app):
    register_plugin("pybtex.style.labels", "author_year", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)
    register_referencing("sphinxcontrib.bibtex.style.referencing", "author_year_label",
                         AuthorYearLabelReferences)
    return {"parallel_read_safe": True}
