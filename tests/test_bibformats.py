"""BibTeX and Markdown reference lists as generators write them
(pipeline/evaluate/bibliography/formats.py): fields read, order kept, what is not a reference counted,
and malformed BibTeX refused with its line."""

from __future__ import annotations

import pytest

from pipeline.evaluate.bibliography import formats as F

BIB = r"""% written by a generator
@string{neurips = "Advances in Neural Information Processing Systems"}

@inproceedings{vaswani2017,
  title = {Attention Is {All} You Need},
  author = "Vaswani, Ashish and Shazeer, Noam",
  booktitle = neurips,
  year = 2017,
}
@article{schr,
  title = "On the {Schr\"{o}dinger} Equation of {G}raphs",
  journal = {Phys. Rev.} # { B},
  doi = {https://doi.org/10.1103/PhysRevB.1.2},
  year = {19xx}
}
@comment{@article{not, title={Not an entry}}}
@misc(arxiv2020,
  title = {A Survey of Surveys},
  eprint = {2001.00001},
  archivePrefix = {arXiv}
)
@misc{nokey}
@preamble{"\newcommand{\x}{y}"}
"""


def test_bibtex_entries_in_order_with_fields_and_counted_non_entries() -> None:
    parsed = F.parse_bibtex(BIB, "gen.bib")
    assert [r["title"] for r in parsed.references] == [
        "Attention Is All You Need",
        "On the Schrodinger Equation of Graphs",
        "A Survey of Surveys",
        None,
    ]
    first, second, third, fourth = parsed.references
    assert first["year"] == 2017 and first["doi"] is None and first["arxiv_id"] is None
    # a @string macro is expanded, so the venue is in the raw text
    assert "Advances in Neural Information Processing Systems" in first["raw"]
    assert second["doi"] == "https://doi.org/10.1103/PhysRevB.1.2"
    assert "Phys. Rev. B" in second["raw"] and second["year"] is None  # "19xx" is no year
    assert third["arxiv_id"] == "2001.00001"
    assert fourth == {"raw": None, "title": None, "doi": None, "arxiv_id": None, "year": None}
    assert parsed.dropped == {
        F.OUTSIDE_ENTRY: 1,
        "bibtex @string": 1,
        "bibtex @comment": 1,
        "bibtex @preamble": 1,
    }


def test_an_eprint_of_another_archive_is_no_arxiv_id() -> None:
    (entry,) = F.parse_bibtex(
        "@article{a, title={Some Title Here}, eprint={PMC123}, archiveprefix={PubMed}}", "x"
    ).references
    assert entry["arxiv_id"] is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("@article{a, title = {Open brace", "x.bib:1: a '{' that never closes"),
        ('\n\n@article{a, title = "open quote}', "x.bib:3: a '\"' that never closes"),
        ("@article{a, title {No equals}}", "x.bib:1: a field 'name = value' expected"),
        ("@article{a, title = {T} year = 2}", "',' or '}' expected after field 'title'"),
        ("@article{a, title = {T},\n", "x.bib:1: an entry that never closes"),
        # a brace left open swallows the lines after it: the error names the field's line
        (
            "@article{a,\n title={Open,\n year={2017}\n}\n@article{b, title={B}}\n",
            "x.bib:2: ',' or '}' expected after field 'title'",
        ),  # fmt: skip
    ],
)
def test_malformed_bibtex_is_an_error_naming_the_line(text: str, says: str) -> None:
    with pytest.raises(F.BibFormatError, match=None) as caught:
        F.parse_bibtex(text, "x.bib")
    assert says in str(caught.value)


def test_an_entry_without_a_key_is_read_from_its_first_field() -> None:
    """Generators drop the key; the title must not be taken for one and lost."""
    (entry,) = F.parse_bibtex(
        "@article{title={Attention is all you need}, year=2017}", "x"
    ).references
    assert (entry["title"], entry["year"]) == ("Attention is all you need", 2017)


def test_one_entry_per_bibtex_string() -> None:
    assert F.bibtex_entry("@book{b, title={A Book of Things}}", "w")["title"] == "A Book of Things"
    with pytest.raises(F.BibFormatError, match="one entry, found 2"):
        F.bibtex_entry("@book{b, title={A}} @book{c, title={B}}", "w")


MARKDOWN = """# References

Some words a generator wrote before the list.

1. A. Doe. *Graph Matching Networks*. In NeurIPS, 2019.
2) B. Roe, [Sparse Attention](https://arxiv.org/abs/2101.00001v2),
   arXiv, 2021.
- C. Poe. `Code Models`. <https://doi.org/10.1000/XYZ>
* D. Moe. Tabular anomaly
continued on an unbroken line.
[12] E. Loe. Bracketed Numbers.

    an indented line after a blank continues the item

A closing remark.
## Further reading
+ F. Zoe. Plus Items.
"""


def test_markdown_items_in_order_with_links_and_counted_prose() -> None:
    parsed = F.parse_markdown(MARKDOWN)
    assert [r["raw"] for r in parsed.references] == [
        "A. Doe. Graph Matching Networks. In NeurIPS, 2019.",
        "B. Roe, Sparse Attention https://arxiv.org/abs/2101.00001v2, arXiv, 2021.",
        "C. Poe. Code Models. https://doi.org/10.1000/XYZ",
        "D. Moe. Tabular anomaly continued on an unbroken line.",
        "E. Loe. Bracketed Numbers. an indented line after a blank continues the item",
        "F. Zoe. Plus Items.",
    ]
    assert parsed.dropped == {F.HEADING: 2, F.OUTSIDE_ITEM: 2}


def test_markdown_without_list_items_is_one_reference_per_line() -> None:
    parsed = F.parse_markdown("## Bibliography\n\nA. Title One.\n\nB. Title Two.\n")
    assert [r["raw"] for r in parsed.references] == ["A. Title One.", "B. Title Two."]
    assert parsed.dropped == {F.HEADING: 1}
    assert F.parse_markdown("").references == []
