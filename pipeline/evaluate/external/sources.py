"""Where a foreign model's features come from, each joined to the eval candidates.

* :class:`TursoSource` (``--turso-url``): a table of a Turso / libSQL database (``libsql://``
  or ``https://`` with a token, ``file:PATH`` or a local database file), one row per paper
  keyed by ``--features-key`` in any alias form (:mod:`pipeline.evaluate.external.keys`).
  The token comes from ``--turso-token`` or ``TURSO_AUTH_TOKEN`` / ``TURSO_DB_TOKEN``; it is
  handed to the client only, and every message goes through
  :func:`pipeline.rules.redact.redact` (a URL may carry ``?authToken=``).
* :class:`FileSource` (``--features FILE``): Parquet or CSV with ``candidate_id`` (any alias
  form), optionally ``survey_id`` (pair features), and the feature columns.
* :class:`ReleaseSource`: the release's own visible features (the ``features`` command's
  names, :mod:`pipeline.rank.features`), computed from the answer-free candidates view.

Every source reads the columns the model asks of it and nothing else; every value must be
a number (or null: missing). A source row whose key names no candidate is counted and
dropped; a source whose rows name none is an error naming how many rows it read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.errors import PipelineError
from pipeline.evaluate.columns import CANDIDATE_ID, SURVEY_ID
from pipeline.evaluate.external.keys import match_keys
from pipeline.evaluate.external.turso_remote import TIMEOUT_S, RemoteConnection
from pipeline.rank.features import FEATURE_NAMES, compute_features
from pipeline.rules.redact import redact

TURSO_TOKEN_ENV = ("TURSO_AUTH_TOKEN", "TURSO_DB_TOKEN")  # both in redact.SECRET_ENV
REMOTE_SCHEMES = ("libsql://", "https://", "http://", "wss://", "ws://")
FETCH_ROWS = 10_000
EXAMPLES = 3


class SourceError(PipelineError, ValueError):
    """A feature source cannot be read or matched (one line naming the flag)."""


@dataclass
class Block:
    """What one source gave: ``frame`` has ``candidate_id`` (and ``survey_id`` for pair
    features) and the columns asked for; ``facts`` what the results record of it."""

    frame: pl.DataFrame
    facts: dict[str, Any] = field(default_factory=dict)


def _numeric(frame: pl.DataFrame, columns: list[str], where: str) -> pl.DataFrame:
    """``frame`` with ``columns`` as Float64 (booleans as 0/1).

    Raises:
        SourceError: a column holds text or another non-number (naming it and a value).
    """
    for column in columns:
        dtype = frame.schema[column]
        if dtype.is_numeric() or dtype == pl.Boolean or dtype == pl.Null:
            continue
        example = frame[column].drop_nulls().head(1).to_list()
        shown = repr(example[0])[:40] if example else "?"
        raise SourceError(
            f"{where}: column {column!r} is not numeric ({dtype}, e.g. {shown}); a model "
            "feature must be a number (or null: missing)"
        )
    return frame.with_columns(pl.col(c).cast(pl.Float64) for c in columns)


def _matched(
    rows: pl.DataFrame,
    key: str,
    keys: pl.DataFrame,
    columns: list[str],
    where: str,
    read: int,
    sample: list[Any] | None = None,
) -> Block:
    """The rows whose ``key`` names a candidate, one per candidate (and survey): the first.
    ``sample``: key values to name when none matches (default: the first of ``rows``)."""
    matched = match_keys(rows, key, keys)
    on = [CANDIDATE_ID, *([SURVEY_ID] if SURVEY_ID in rows.columns and key != SURVEY_ID else [])]
    if matched.height == 0:
        if sample is None:
            sample = rows[key].drop_nulls().head(EXAMPLES).to_list()
        theirs = ", ".join(repr(v) for v in sample[:EXAMPLES])
        ours = ", ".join(repr(v) for v in keys[CANDIDATE_ID].head(EXAMPLES).to_list())
        raise SourceError(
            f"{where}: key column {key!r} matches no eval candidate ({read} row(s) read, 0 "
            f"matched; it has {theirs or 'no values'}, the candidates are e.g. {ours})"
        )
    frame = matched.unique(on, keep="first", maintain_order=True).select(*on, *columns)
    facts = {
        "rows_read": read,
        "rows_matched": int(matched.select(pl.col("_row").n_unique()).item()),
        "candidates_matched": frame[CANDIDATE_ID].n_unique(),
    }
    return Block(frame, facts)


# --------------------------------------------------------------------------- Turso / libSQL
def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class TursoSource:
    """A table of a Turso / libSQL database (module doc)."""

    url: str
    token: str | None = None
    table: str = "papers"
    key: str = "id"
    timeout_s: float = TIMEOUT_S
    _connection: Any = None
    _columns: tuple[str, ...] | None = None

    @property
    def flag(self) -> str:
        return f"--turso-url {self.shown}"

    @property
    def shown(self) -> str:
        """The URL as a message names it: redacted, and the token, wherever it came from,
        replaced."""
        text = redact(self.url)
        return text.replace(self.token, "<redacted>") if self.token else text

    @property
    def where(self) -> str:
        """The database as the results name it: a server's redacted URL, a local file's
        name (never a local path)."""
        if self.url.startswith(REMOTE_SCHEMES):
            return self.shown
        return Path(self.url.removeprefix("file:")).name

    @property
    def label(self) -> str:
        return f"turso {self.where} table {self.table}"

    def _say(self, text: str) -> str:
        text = redact(" ".join(str(text).split()))
        return (text.replace(self.token, "<redacted>") if self.token else text)[:300]

    def _connect(self) -> Any:
        if self._connection is not None:
            return self._connection
        try:
            import libsql
        except ImportError as e:
            raise SourceError(
                f"{self.flag}: needs the libsql package ({e}); pip install '.[turso]'"
            ) from None
        remote = self.url.startswith(REMOTE_SCHEMES)
        if remote:
            token = self.token or next(
                (os.environ[n] for n in TURSO_TOKEN_ENV if os.environ.get(n)), ""
            )
            self.token = token or None
            target = self.url
        else:
            target = self.url.removeprefix("file:")
            if not Path(target).is_file():  # the client would create an empty database
                raise SourceError(
                    f"--turso-url {self.url}: no such database file (a local path, file:PATH, "
                    "or a libsql:// / https:// URL)"
                )
            token = ""
        try:
            if remote:  # a child process: the remote client has no deadline of its own
                connection = RemoteConnection(target, token, timeout_s=self.timeout_s)
            else:
                connection = libsql.connect(target, auth_token=token)
                connection.execute("SELECT 1").fetchall()
        except Exception as e:  # noqa: BLE001 - the client's errors are plain ValueErrors
            hint = (
                ""
                if token or not remote
                else "; no token given (--turso-token or TURSO_AUTH_TOKEN)"
            )
            raise SourceError(
                f"{self.flag}: cannot be reached ({type(e).__name__}: {self._say(str(e))}){hint}"
            ) from None
        self._connection = connection
        return connection

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._connect().execute(sql, params).fetchall()
        except SourceError:
            raise
        except Exception as e:  # noqa: BLE001
            raise SourceError(
                f"{self.flag}: the query failed ({type(e).__name__}: {self._say(str(e))})"
            ) from None

    def columns(self) -> tuple[str, ...]:
        """The table's columns but the key.

        Raises:
            SourceError: no such table or view (naming those there), or no key column.
        """
        if self._columns is not None:
            return self._columns
        tables = [r[0] for r in self._query(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")]  # fmt: skip
        if self.table not in tables:
            raise SourceError(
                f"{self.flag}: no table {self.table!r} (--features-table); it has "
                f"{', '.join(tables) or 'no tables'}"
            )
        names = [r[1] for r in self._query(f"PRAGMA table_info({_quoted(self.table)})")]
        if self.key not in names:
            raise SourceError(
                f"{self.flag}: table {self.table!r} has no column {self.key!r} "
                f"(--features-key); its columns: {', '.join(names)}"
            )
        self._columns = tuple(n for n in names if n != self.key)
        return self._columns

    def read(self, columns: list[str], keys: pl.DataFrame) -> Block:
        """The rows of the table naming a candidate, with ``columns``, read in batches."""
        where = f"{self.flag} table {self.table}"
        select = ", ".join(_quoted(c) for c in [self.key, *columns])
        sql = f"SELECT {select} FROM {_quoted(self.table)}"
        try:
            cursor = self._connect().execute(sql)
        except Exception as e:  # noqa: BLE001
            raise SourceError(f"{where}: the query failed ({self._say(str(e))})") from None
        names = [self.key, *columns]
        parts: list[pl.DataFrame] = []
        sample: list[Any] = []
        read = 0
        while True:
            try:
                rows = cursor.fetchmany(FETCH_ROWS)
            except Exception as e:  # noqa: BLE001 - a server that stalls or fails mid-table
                raise SourceError(
                    f"{where}: reading rows failed after {read:,} ({self._say(str(e))})"
                ) from None
            if not rows:
                break
            batch = pl.DataFrame(
                rows, schema=names, orient="row", infer_schema_length=None
            ).with_row_index("_row", offset=read)
            read += batch.height
            batch = batch.with_columns(pl.col(self.key).cast(pl.String))
            if not sample:
                sample = batch[self.key].drop_nulls().head(EXAMPLES).to_list()
            batch = _numeric(batch, columns, where)
            parts.append(match_keys(batch, self.key, keys).drop(CANDIDATE_ID))
        rows_all = pl.concat(parts) if parts else pl.DataFrame(
            schema={"_row": pl.UInt32, self.key: pl.String, **dict.fromkeys(columns, pl.Float64)})  # fmt: skip
        block = _matched(rows_all, self.key, keys, columns, where, read, sample)
        block.facts = {"source": "turso", "table": self.table, "key": self.key,
                       "location": self.where, **block.facts}  # fmt: skip
        return block

    def close(self) -> None:
        if self._connection is not None:
            close = getattr(self._connection, "close", None)
            if close is not None:
                close()
            self._connection = None


# --------------------------------------------------------------------------- a file
@dataclass
class FileSource:
    """``--features FILE``: Parquet or CSV keyed by ``candidate_id`` (module doc)."""

    path: Path
    _frame: pl.DataFrame | None = None

    @property
    def flag(self) -> str:
        return f"--features {self.path}"

    @property
    def label(self) -> str:
        return f"file {Path(self.path).name}"

    def _read(self) -> pl.DataFrame:
        if self._frame is not None:
            return self._frame
        path = Path(self.path)
        if not path.is_file():
            raise SourceError(f"{self.flag}: no such file")
        try:
            if path.suffix.lower() in (".csv", ".tsv"):
                frame = pl.read_csv(path, separator="\t" if path.suffix.lower() == ".tsv" else ",",
                                    infer_schema_length=None)  # fmt: skip
            else:
                frame = pl.read_parquet(path)
        except (pl.exceptions.PolarsError, OSError) as e:
            raise SourceError(
                f"{self.flag}: not a readable Parquet or CSV file ({' '.join(str(e).split())[:200]})"
            ) from None
        if CANDIDATE_ID not in frame.columns:
            raise SourceError(
                f"{self.flag}: no column {CANDIDATE_ID!r} (the paper, in any id form); its "
                f"columns: {', '.join(frame.columns)}"
            )
        self._frame = frame
        return frame

    def columns(self) -> tuple[str, ...]:
        return tuple(c for c in self._read().columns if c not in (CANDIDATE_ID, SURVEY_ID))

    def read(self, columns: list[str], keys: pl.DataFrame) -> Block:
        frame = self._read()
        pair = [SURVEY_ID] if SURVEY_ID in frame.columns else []
        rows = _numeric(
            frame.select(CANDIDATE_ID, *pair, *columns).with_row_index("_row"), columns, self.flag
        ).rename({CANDIDATE_ID: "_given"})
        block = _matched(rows, "_given", keys, columns, self.flag, frame.height)
        block.facts = {"source": "file", "file": self.path.name, "pair_features": bool(pair),
                       **block.facts}  # fmt: skip
        return block


# --------------------------------------------------------------------------- the release
@dataclass
class ReleaseSource:
    """The release's own visible features, from the answer-free candidates view."""

    view: pl.DataFrame
    flag: str = "the release's features"
    label: str = "release"

    def columns(self) -> tuple[str, ...]:
        return FEATURE_NAMES

    def read(self, columns: list[str], keys: pl.DataFrame) -> Block:
        frame = compute_features(self.view, tuple(columns))
        return Block(
            frame.select(SURVEY_ID, CANDIDATE_ID, *[pl.col(c).cast(pl.Float64) for c in columns]),
            {"source": "release"},
        )
