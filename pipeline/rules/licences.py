"""Which papers' full text a release may redistribute: the licence rule, as one table.

A paper's licence is the URL its arXiv record gives (``extract``'s ``license``). Its text
may be redistributed (``corpus_sections``) when the licence is in :data:`LICENCES` with
``allowed`` set, and, for a ``non_commercial`` licence, only when the release is declared
non-commercial (``[release] non_commercial``). Everything else is refused: arXiv's
non-exclusive distribution licence (it grants arXiv alone the right to distribute), the
no-derivatives variants (replacing citation markers is a change to the text), a missing
licence, and any URL not listed here.

``extract`` keeps the text of every paper some release may redistribute
(:func:`extractable`); the release picks its own share (:func:`permitted`). A URL is
compared after :func:`normalise` (scheme, ``www.`` and the trailing slash do not matter).

A change to the table changes what extract keeps, and extract's markers know the config and
``schema.SCHEMA_VERSION``, not the code: the change comes with a new ``SCHEMA_VERSION``
(``tests/test_section_texts.py`` pins the pair).
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl


class Licence(NamedTuple):
    url: str  # normalised (see normalise)
    name: str  # short name for counts and the card
    allowed: bool  # its text may be redistributed (in a non-commercial release if ``nc``)
    non_commercial: bool  # only in a release declared non-commercial


# The one table. arXiv's licence choices (https://info.arxiv.org/help/license/) plus the
# older URLs its records still carry.
LICENCES: tuple[Licence, ...] = (
    Licence("creativecommons.org/licenses/by/4.0", "CC BY 4.0", True, False),
    Licence("creativecommons.org/licenses/by/3.0", "CC BY 3.0", True, False),
    Licence("creativecommons.org/licenses/by-sa/4.0", "CC BY-SA 4.0", True, False),
    Licence("creativecommons.org/licenses/by-sa/3.0", "CC BY-SA 3.0", True, False),
    Licence("creativecommons.org/publicdomain/zero/1.0", "CC0 1.0", True, False),
    Licence("creativecommons.org/publicdomain/mark/1.0", "Public Domain Mark 1.0", True, False),
    Licence("creativecommons.org/licenses/publicdomain", "Public Domain", True, False),
    Licence("creativecommons.org/licenses/by-nc-sa/4.0", "CC BY-NC-SA 4.0", True, True),
    Licence("creativecommons.org/licenses/by-nc-sa/3.0", "CC BY-NC-SA 3.0", True, True),
    Licence("creativecommons.org/licenses/by-nc/4.0", "CC BY-NC 4.0", True, True),
    Licence("creativecommons.org/licenses/by-nc/3.0", "CC BY-NC 3.0", True, True),
    Licence("creativecommons.org/licenses/by-nd/4.0", "CC BY-ND 4.0", False, False),
    Licence("creativecommons.org/licenses/by-nc-nd/4.0", "CC BY-NC-ND 4.0", False, True),
    Licence("creativecommons.org/licenses/by-nc-nd/3.0", "CC BY-NC-ND 3.0", False, True),
    Licence("arxiv.org/licenses/nonexclusive-distrib/1.0", "arXiv non-exclusive", False, False),
    Licence("arxiv.org/licenses/assumed-1991-2003", "arXiv assumed 1991-2003", False, False),
)
_BY_URL = {lic.url: lic for lic in LICENCES}


def normalise(url: str | None) -> str:
    """A licence URL without scheme, ``www.``, trailing slash and case: the table's key."""
    if not url:
        return ""
    u = url.strip().lower()
    for prefix in ("https://", "http://"):
        u = u.removeprefix(prefix)
    return u.removeprefix("www.").rstrip("/")


def permitted(url: str | None, non_commercial: bool) -> bool:
    """Whether a paper under ``url`` may have its text in a release (``non_commercial``:
    the release is declared non-commercial)."""
    lic = _BY_URL.get(normalise(url))
    return lic is not None and lic.allowed and (non_commercial or not lic.non_commercial)


def extractable(url: str | None) -> bool:
    """Whether some release may carry the text (what ``extract`` keeps)."""
    return permitted(url, non_commercial=True)


def licence_name(url: str | None) -> str:
    """The table's short name of ``url``; ``url`` itself when it is not in the table."""
    lic = _BY_URL.get(normalise(url))
    return lic.name if lic is not None else (url or "")


def permitted_urls(non_commercial: bool) -> list[str]:
    """Normalised URLs a release may carry (for a Polars ``is_in`` on :func:`normalise_expr`)."""
    return [
        lic.url for lic in LICENCES if lic.allowed and (non_commercial or not lic.non_commercial)
    ]


def normalise_expr(col: pl.Expr) -> pl.Expr:
    """:func:`normalise` as a Polars expression."""
    return (
        col.fill_null("")
        .str.strip_chars()
        .str.to_lowercase()
        .str.replace(r"^https?://", "")
        .str.replace(r"^www\.", "")
        .str.replace(r"/+$", "")
    )


def name_expr(col: pl.Expr) -> pl.Expr:
    """:func:`licence_name` as a Polars expression."""
    return normalise_expr(col).replace_strict(
        [lic.url for lic in LICENCES], [lic.name for lic in LICENCES], default=col.fill_null("")
    )
