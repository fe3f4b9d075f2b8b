"""Reading and validating submitted runs.

A run scores (survey, candidate) pairs of the eval set. The format is chosen by
the file suffix:

* ``.parquet``: columns ``survey_id``, ``candidate_id``, ``score`` (other columns
  are ignored), or the BEIR/MTEB names ``query-id``, ``corpus-id``, ``score``
  (:data:`COLUMN_ALIASES`); the system name is the file stem.
* ``.csv``: a header row naming the same columns; the system name is the file stem.
* ``.tsv``: tab-separated ``query-id corpus-id score`` (BEIR's qrels layout), with
  or without a header row naming the columns; the system name is the file stem.
* anything else: a TREC run, ``qid Q0 docid rank score tag`` separated by
  whitespace, qid = survey_id and docid = candidate_id. The system name is the
  tag, which must be the same on every line. The rank field is ignored (as in
  trec_eval): the order comes from the score, ties by the tie key of
  :mod:`pipeline.evaluate.scoring.compute` (not by the rank field, nor by docid as trec_eval).

A name given with the run (``--name`` after ``--run``; ``name=`` here) replaces the tag
or the stem, so two TREC runs with the same tag can be evaluated together. Scores held
in memory (a ``{survey_id: {candidate_id: score}}`` dict or a DataFrame with the run
columns) are checked by the same rules (:func:`scores_run`).

Every problem raises :class:`RunError` naming the file and, for text formats, the
1-based line number (``path:line: message``; Parquet: ``path: row N: message``).
Rows whose ids are not in the eval set are an error too, unless ``lenient``:
then they are dropped, counted in :attr:`Run.n_dropped_unknown` and reported
with a :class:`RunWarning`. A run need not score every judged candidate: the
missing ones rank last. :func:`missing_surveys` lists the eval surveys a run has
no row for at all (the evaluate stage warns about them, or fails with
``require_complete``).
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.errors import PipelineError, option
from pipeline.core.parquet import readable_schema
from pipeline.core.schema import BEIR_CORPUS_ID, BEIR_QUERY_ID
from pipeline.evaluate.columns import CANDIDATE_ID, LINE_NUMBER, SCORE, SURVEY_ID

RUN_COLUMNS = (SURVEY_ID, CANDIDATE_ID, SCORE)
# Other names a header may give each run column: BEIR/MTEB's (what the release's qrels use)
# and the usual snake_case spellings.
COLUMN_ALIASES = {
    SURVEY_ID: (BEIR_QUERY_ID, "query_id", "qid"),
    CANDIDATE_ID: (BEIR_CORPUS_ID, "corpus_id", "docid", "doc_id"),
    SCORE: (),
}
TREC_FIELDS = ("qid", "Q0", "docid", "rank", "score", "tag")
TSV_FIELDS = 3
TREC, CSV, TSV, PARQUET, SCORES = "trec", "csv", "tsv", "parquet", "scores"

_RAW_SCORE = "_score_text"
_TAG = "_tag"

RETRIEVAL_OPTION = option("--mode retrieval", "mode='retrieval'")


class RunError(PipelineError, ValueError):
    """A run file is malformed or does not match the eval set (the message says where)."""


class RunWarning(UserWarning):
    """A run was accepted with a gap: rows dropped in lenient mode, or eval surveys it has no row for."""


@dataclass(frozen=True)
class Run:
    """A validated run.

    Attributes:
        name: system name (the name given, else the TREC tag, else the file stem).
        path: the file read; None for scores held in memory.
        format: ``trec``, ``csv``, ``tsv``, ``parquet`` or ``scores`` (in memory).
        scores: ``survey_id``, ``candidate_id``, ``score`` (finite Float64) and
            ``line_number`` (file line, or 1-based row for Parquet), one row per
            scored pair, in file order.
        n_rows: data rows read from the file.
        n_dropped_unknown: rows dropped because their ids are not in the eval set.
    """

    name: str
    path: Path | None
    format: str
    scores: pl.DataFrame
    n_rows: int
    n_dropped_unknown: int = 0

    @property
    def where(self) -> str:
        """The file, or what the in-memory scores are, for messages."""
        return str(self.path) if self.path is not None else f"scores of {self.name!r}"

    def renamed(self, name: str) -> Run:
        """The same run under another system name."""
        return Run(name, self.path, self.format, self.scores, self.n_rows, self.n_dropped_unknown)


def run_format(path: Path) -> str:
    """``parquet``, ``csv``, ``tsv`` or ``trec`` from the file suffix."""
    suffix = path.suffix.lower()
    return {".parquet": PARQUET, ".csv": CSV, ".tsv": TSV}.get(suffix, TREC)


def _at(path: Path | str, fmt: str, line: int) -> str:
    return f"{path}: row {line}" if fmt in (PARQUET, SCORES) else f"{path}:{line}"


# Text runs are read in blocks of whole lines, so the memory is one block plus the parsed
# columns (two ids, a float and a line number per row), never the whole file as one string
# and a list of its line strings (several times the file's size).
READ_BLOCK_BYTES = 4 * 1024 * 1024
CSV_BLOCK_ROWS = 100_000


def _text_blocks(path: Path) -> Iterator[tuple[int, str]]:
    """``(number of its first line, text)`` of consecutive blocks of whole lines of ``path``.

    Raises:
        RunError: the file is not UTF-8 (names the line).
    """
    first_line = 1
    carry = b""
    with path.open("rb") as f:
        while True:
            data = f.read(READ_BLOCK_BYTES)
            block = carry + data
            cut = len(block) if not data else block.rfind(b"\n") + 1
            if data and cut == 0:  # no line end yet: a line longer than a block
                carry = block
                continue
            carry, block = block[cut:], block[:cut]
            try:
                text = block.decode("utf-8")
            except UnicodeDecodeError as e:
                line = first_line + block.count(b"\n", 0, e.start)
                raise RunError(f"{path}:{line}: not UTF-8 text ({e})") from e
            if text:
                yield first_line, text
            first_line += block.count(b"\n")
            if not data:
                return


def _trec_block(path: Path, first_line: int, text: str) -> pl.DataFrame:
    """The TREC lines of one block: survey_id, candidate_id, raw score, tag, line number."""
    lines = pl.DataFrame({"_text": pl.Series([text]).str.split("\n").explode()})
    fields = (
        lines.with_columns(
            pl.int_range(first_line, first_line + pl.len(), dtype=pl.Int64).alias(LINE_NUMBER),
            pl.col("_text").str.strip_chars(),
        )
        .filter(pl.col("_text") != "")  # blank lines (e.g. the trailing newline) carry nothing
        .with_columns(pl.col("_text").str.replace_all(r"\s+", " ").str.split(" ").alias("_fields"))
    )
    wrong = fields.filter(pl.col("_fields").list.len() != len(TREC_FIELDS))
    if wrong.height:
        line, n = wrong.select(LINE_NUMBER, pl.col("_fields").list.len()).row(0)
        hint = (
            "; a 3-column run (query-id, corpus-id, score) is read as such from a file named *.tsv"
            if n == TSV_FIELDS
            else ""
        )
        raise RunError(
            f"{path}:{line}: expected {len(TREC_FIELDS)} whitespace-separated fields "
            f"({' '.join(TREC_FIELDS)}) of a TREC run, got {n}{hint}"
        )
    return fields.select(
        pl.col("_fields").list.get(TREC_FIELDS.index("qid")).alias(SURVEY_ID),
        pl.col("_fields").list.get(TREC_FIELDS.index("docid")).alias(CANDIDATE_ID),
        pl.col("_fields").list.get(TREC_FIELDS.index("score")).alias(_RAW_SCORE),
        pl.col("_fields").list.get(TREC_FIELDS.index("tag")).alias(_TAG),
        pl.col(LINE_NUMBER),
    )


def _read_trec(path: Path) -> tuple[pl.DataFrame, str]:
    """Survey_id, candidate_id, score, line_number of a TREC run (checked), and its tag."""
    parts: list[pl.DataFrame] = []
    tag: str | None = None
    tag_line = 0
    for first_line, text in _text_blocks(path):
        frame = _trec_block(path, first_line, text)
        if frame.height == 0:
            continue
        if tag is None:
            tag, tag_line = frame[_TAG][0], frame[LINE_NUMBER][0]
        other = frame.filter(pl.col(_TAG) != tag)
        if other.height:
            line, other_tag = other.select(LINE_NUMBER, _TAG).row(0)
            raise RunError(
                f"{path}:{line}: tag {other_tag!r} differs from {tag!r} on line {tag_line}; "
                "a TREC run file must hold exactly one system (one tag): split it into one "
                "file per tag"
            )
        parts.append(_check_rows(frame.drop(_TAG), path, TREC))
    if tag is None:
        raise RunError(f"{path}: no run lines")
    return pl.concat(parts), tag


def _expected_columns() -> str:
    return ", ".join(
        f"{column} (or {' / '.join(aliases)})" if aliases else column
        for column, aliases in COLUMN_ALIASES.items()
    )


def column_positions(header: list[str], where: str) -> dict[str, int]:
    """Position of each run column in ``header``, by its name or an alias (:data:`COLUMN_ALIASES`).

    Raises:
        RunError: a run column is missing, named twice, or a header name repeats; the
            message names ``where`` (``path:1`` or ``path``).
    """
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise RunError(f"{where}: repeated column(s) {repeated} in header {header}")
    positions: dict[str, int] = {}
    missing, ambiguous = [], []
    for column, aliases in COLUMN_ALIASES.items():
        found = [name for name in (column, *aliases) if name in header]
        if not found:
            missing.append(column)
        elif len(found) > 1:
            ambiguous.append(found)
        else:
            positions[column] = header.index(found[0])
    if missing or ambiguous:
        problem = (
            f"missing column(s) {missing}"
            if missing
            else f"columns {ambiguous} name the same field"
        )
        raise RunError(f"{where}: {problem} in header {header}; expected {_expected_columns()}")
    return positions


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_delimited(path: Path, fmt: str) -> pl.DataFrame:
    """Survey_id, candidate_id, score, line_number of a CSV or TSV run (checked), a block of
    rows at a time. A TSV run may have no header: three columns in BEIR's order."""
    parts: list[pl.DataFrame] = []
    ids: dict[str, list[str]] = {c: [] for c in RUN_COLUMNS}
    line_numbers: list[int] = []
    delimiter, kind = (",", "comma") if fmt == CSV else ("\t", "tab")

    def flush() -> None:
        block = pl.DataFrame(
            {
                SURVEY_ID: pl.Series(ids[SURVEY_ID], dtype=pl.String).str.strip_chars(),
                CANDIDATE_ID: pl.Series(ids[CANDIDATE_ID], dtype=pl.String).str.strip_chars(),
                _RAW_SCORE: pl.Series(ids[SCORE], dtype=pl.String),
                LINE_NUMBER: pl.Series(line_numbers, dtype=pl.Int64),
            }
        )
        if block.height:
            parts.append(_check_rows(block, path, fmt))
        for values in ids.values():
            values.clear()
        line_numbers.clear()

    def add(row: list[str], line: int) -> None:
        for column, position in positions.items():
            ids[column].append(row[position])
        line_numbers.append(line)
        if len(line_numbers) >= CSV_BLOCK_ROWS:
            flush()

    try:
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.reader(f, delimiter=delimiter)
            header = next(reader, None)
            if header is None:
                raise RunError(f"{path}:1: empty file; expected a header {_expected_columns()}")
            header = [h.strip() for h in header]
            headerless = fmt == TSV and len(header) == TSV_FIELDS and _is_number(header[2])
            if headerless:  # query-id, corpus-id, score by position
                positions = {column: i for i, column in enumerate(RUN_COLUMNS)}
                add(header, 1)
            else:
                positions = column_positions(header, f"{path}:1")
            width = len(header)
            for row in reader:
                if not row:
                    continue
                if len(row) != width:
                    raise RunError(
                        f"{path}:{reader.line_num}: expected {width} {kind}-separated fields "
                        f"(as in {'the first row' if headerless else 'the header'}), got {len(row)}"
                    )
                add(row, reader.line_num)
    except UnicodeDecodeError as e:
        raise RunError(f"{path}: not UTF-8 text ({e})") from e
    except csv.Error as e:
        raise RunError(f"{path}: {e}") from e
    flush()
    if not parts:
        raise RunError(f"{path}: no rows")
    return pl.concat(parts)


def _read_parquet(path: Path) -> pl.DataFrame:
    names = list(readable_schema(path, RunError))
    positions = column_positions(names, str(path))
    columns = {column: names[i] for column, i in positions.items()}
    return _checked_frame(
        pl.read_parquet(path, columns=list(columns.values())), columns, path, PARQUET
    )


def _checked_frame(
    frame: pl.DataFrame, columns: dict[str, str], where: Path | str, fmt: str
) -> pl.DataFrame:
    """The run columns of a table (Parquet or in memory), types and rows checked; rows are
    numbered from 1."""
    for column in (SURVEY_ID, CANDIDATE_ID):
        dtype = frame.schema[columns[column]]
        if not (dtype == pl.String or dtype.is_integer()):
            raise RunError(f"{where}: column {columns[column]} has type {dtype}, expected string")
    dtype = frame.schema[columns[SCORE]]
    if not (dtype.is_numeric() or dtype == pl.String):
        raise RunError(f"{where}: column {columns[SCORE]} has type {dtype}, expected a number")
    frame = frame.select(
        pl.col(columns[SURVEY_ID]).cast(pl.String).alias(SURVEY_ID),
        pl.col(columns[CANDIDATE_ID]).cast(pl.String).alias(CANDIDATE_ID),
        pl.col(columns[SCORE]).alias(_RAW_SCORE),
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias(LINE_NUMBER),
    )
    if frame.height == 0:
        raise RunError(f"{where}: no rows")
    return _check_rows(frame, where, fmt)


def _first_bad(frame: pl.DataFrame, bad: pl.Expr, *columns: str) -> tuple | None:
    hit = frame.filter(bad)
    return hit.select(LINE_NUMBER, *columns).row(0) if hit.height else None


def _check_rows(frame: pl.DataFrame, path: Path | str, fmt: str) -> pl.DataFrame:
    """Check the ids and scores of a block of rows; return survey_id, candidate_id, score
    (Float64) and line_number."""
    for column in (SURVEY_ID, CANDIDATE_ID):
        found = _first_bad(frame, pl.col(column).is_null() | (pl.col(column) == ""))
        if found:
            raise RunError(f"{_at(path, fmt, found[0])}: empty {column}")
    raw = pl.col(_RAW_SCORE)
    raw_text = raw.cast(pl.String).str.strip_chars()
    parsed = (raw_text if frame.schema[_RAW_SCORE] == pl.String else raw).cast(
        pl.Float64, strict=False
    )
    frame = frame.with_columns(parsed.alias(SCORE), raw_text.alias(_RAW_SCORE))
    found = _first_bad(frame, pl.col(_RAW_SCORE).is_null() | (pl.col(_RAW_SCORE) == ""))
    if found:
        raise RunError(f"{_at(path, fmt, found[0])}: missing score")
    found = _first_bad(frame, pl.col(SCORE).is_null(), _RAW_SCORE)
    if found:
        raise RunError(f"{_at(path, fmt, found[0])}: score {found[1]!r} is not a number")
    found = _first_bad(frame, ~pl.col(SCORE).is_finite(), _RAW_SCORE)
    if found:
        raise RunError(
            f"{_at(path, fmt, found[0])}: score {found[1]!r} is not finite (NaN or infinite)"
        )
    return frame.select(SURVEY_ID, CANDIDATE_ID, SCORE, LINE_NUMBER)


def _check_pairs(frame: pl.DataFrame, path: Path | str, fmt: str) -> pl.DataFrame:
    """Refuse a (survey_id, candidate_id) given twice, over the whole run.

    The pairs' 64-bit hashes are sorted and compared with their neighbours first (8 bytes
    a row; a table of the distinct pairs took more memory than the run itself), and the
    pairs compared exactly only among the rows whose hash repeats.
    """
    pair = pl.struct(SURVEY_ID, CANDIDATE_ID)
    hashes = frame.select(pair.hash(seed=0)).to_series()
    ordered = hashes.sort()
    if not (ordered.slice(1) == ordered.slice(0, max(len(ordered) - 1, 0))).any():
        return frame
    repeated = frame.filter(hashes.is_duplicated())
    found = _first_bad(repeated, ~pair.is_first_distinct(), SURVEY_ID, CANDIDATE_ID)
    if found:
        line, survey, candidate = found
        first = frame.filter((pl.col(SURVEY_ID) == survey) & (pl.col(CANDIDATE_ID) == candidate))
        raise RunError(
            f"{_at(path, fmt, line)}: duplicate ({SURVEY_ID}, {CANDIDATE_ID}) = ({survey!r}, {candidate!r}), "
            f"first given at {'row' if fmt in (PARQUET, SCORES) else 'line'} {first[LINE_NUMBER][0]}"
        )
    return frame


def read_run(path: str | Path, name: str | None = None) -> Run:
    """Parse and validate a run file on its own (no eval set).

    Args:
        path: a TREC, CSV, TSV or Parquet run (format by suffix, see the module doc).
        name: the system name (default: the TREC tag, else the file stem).

    Returns:
        The run, with every row kept.

    Raises:
        RunError: bad or missing columns, wrong field count, missing, non-numeric or
            non-finite score, empty id, duplicate (survey_id, candidate_id), several
            TREC tags, no rows, an empty name.
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: run file not found (check --run)")
    fmt = run_format(path)
    if fmt == TREC:
        frame, tag = _read_trec(path)
    else:
        frame = _read_delimited(path, fmt) if fmt in (CSV, TSV) else _read_parquet(path)
        tag = path.stem
    scores = _check_pairs(frame, path, fmt)
    return Run(
        name=_system_name(name, tag, path), path=path, format=fmt, scores=scores,
        n_rows=scores.height,
    )  # fmt: skip


def _system_name(name: str | None, default: str, where: Path | str) -> str:
    if name is None:
        return default
    if not name.strip() or name != name.strip():
        raise RunError(f"{where}: system name {name!r} is empty or has surrounding spaces (--name)")
    return name


def scores_run(scores: Mapping[str, Mapping[str, float]] | Any, name: str) -> Run:
    """A run from scores held in memory, checked as a run file is.

    Args:
        scores: ``{survey_id: {candidate_id: score}}``, or a Polars or pandas DataFrame with
            the run columns (or their aliases, :data:`COLUMN_ALIASES`).
        name: the system name.

    Raises:
        RunError: as :func:`read_run`; rows are numbered from 1 (the dict in iteration order).
    """
    where = f"scores of {name!r}"
    _system_name(name, name, where)
    if isinstance(scores, Mapping):
        frame = pl.DataFrame(
            [(str(s), str(c), v) for s, by_candidate in scores.items() for c, v in by_candidate.items()],
            schema={SURVEY_ID: pl.String, CANDIDATE_ID: pl.String, SCORE: pl.Float64},
            orient="row",
        )  # fmt: skip
    elif isinstance(scores, pl.DataFrame):
        frame = scores
    elif type(scores).__module__.startswith("pandas"):
        frame = pl.from_pandas(scores)
    else:
        raise RunError(
            f"{where}: expected a {{survey_id: {{candidate_id: score}}}} dict or a DataFrame, "
            f"got {type(scores).__name__}"
        )
    names = list(frame.columns)
    columns = {c: names[i] for c, i in column_positions(names, where).items()}
    checked = _check_pairs(_checked_frame(frame, columns, where, SCORES), where, SCORES)
    return Run(name=name, path=None, format=SCORES, scores=checked, n_rows=checked.height)


def restrict_to_eval_set(run: Run, eval_pairs: pl.DataFrame, lenient: bool = False) -> Run:
    """Check that every scored pair is a judged (survey, candidate) of the eval set.

    Args:
        run: a run from :func:`read_run`.
        eval_pairs: the eval set's ``survey_id`` and ``candidate_id`` columns.
        lenient: drop unknown pairs (counted, with a :class:`RunWarning`) instead of failing.

    Returns:
        A new :class:`Run` holding only known pairs (the argument is not modified).

    Raises:
        RunError: an unknown pair, when not ``lenient``; names the first offending line.
    """
    known = eval_pairs.select(SURVEY_ID, CANDIDATE_ID).with_columns(pl.lit(True).alias("_known"))
    marked = run.scores.join(known, on=[SURVEY_ID, CANDIDATE_ID], how="left", maintain_order="left")
    unknown = marked.filter(pl.col("_known").is_null())
    if unknown.height == 0:
        return run
    line, survey, candidate = unknown.select(LINE_NUMBER, SURVEY_ID, CANDIDATE_ID).row(0)
    if eval_pairs.filter(pl.col(SURVEY_ID) == survey).height == 0:
        what = f"{SURVEY_ID} {survey!r} is not in the eval set"
    else:
        what = f"{CANDIDATE_ID} {candidate!r} is not a judged candidate of survey {survey!r}"
    where = _at(run.where, run.format, line)
    if not lenient:
        raise RunError(
            f"{where}: {what} ({unknown.height} row(s) with ids not in the eval set; "
            f"{option('--lenient')} drops them; a run over the whole corpus of the split is "
            f"evaluated with {RETRIEVAL_OPTION}, unjudged "
            "documents counting as not relevant)"
        )
    warnings.warn(
        f"{run.where}: dropped {unknown.height} of {run.n_rows} row(s) whose ids are not in the eval set "
        f"(first at {where}: {what})",
        RunWarning,
        stacklevel=2,
    )
    kept = marked.filter(pl.col("_known").is_not_null()).drop("_known")
    return Run(
        name=run.name,
        path=run.path,
        format=run.format,
        scores=kept,
        n_rows=run.n_rows,
        n_dropped_unknown=unknown.height,
    )


def load_run(
    path: str | Path, eval_pairs: pl.DataFrame, lenient: bool = False, name: str | None = None
) -> Run:
    """:func:`read_run` then :func:`restrict_to_eval_set`."""
    return restrict_to_eval_set(read_run(path, name), eval_pairs, lenient=lenient)


def missing_surveys(run: Run, eval_pairs: pl.DataFrame) -> list[str]:
    """The eval surveys (sorted) for which ``run`` has no row: all their candidates rank as missing.

    Args:
        run: a run restricted to the eval set (:func:`load_run`).
        eval_pairs: the eval set's ``survey_id`` column (``candidate_id`` may be present too).
    """
    scored = run.scores.select(pl.col(SURVEY_ID).unique())
    return (
        eval_pairs.select(pl.col(SURVEY_ID).unique())
        .join(scored, on=SURVEY_ID, how="anti")
        .sort(SURVEY_ID)[SURVEY_ID]
        .to_list()
    )
