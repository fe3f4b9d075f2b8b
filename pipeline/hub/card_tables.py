"""The reference tables of the card and METHODS.md, and the leak audit's verdict line, as
Markdown from the release's metadata (:mod:`pipeline.hub.card` fills its templates with
them)."""

from __future__ import annotations

from typing import Any

from pipeline.core import schema as S


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table: integers with thousands separators, None as an empty cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(md_cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def md_cell(value: Any) -> str:
    """One cell of :func:`md_table`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def aspect_audit_table(splits: dict[str, Any]) -> str:
    """Feature x split of the aspects' audit: pooled, per-aspect and per-survey AUC."""
    names = sorted({f for table in splits.values() for f in table})
    scopes = ("pooled", "per_aspect", "per_survey")
    header = ["feature"] + [f"{s} {c.replace('_', ' ')}" for s in sorted(splits) for c in scopes]
    rows = [
        [f"`{n}`"] + [splits[s].get(n, {}).get(c) for s in sorted(splits) for c in scopes]
        for n in names
    ]
    return md_table(header, rows) if rows else "(no aspect audited)"


def passed_verdict(audit: dict[str, Any]) -> str:
    """The verdict of a passed leak audit, naming the AUCs outside the bounds that chance
    explains at the sample's size (``leak_audit.within_chance``)."""
    chance = [
        f"{split}: {', '.join(hits)}"
        for table in (audit, audit.get("relative", {}))
        for split, hits in sorted(table.get("outside_bounds_within_chance", {}).items())
    ]
    if not chance:
        return "passed: every audited AUC is within the bounds and the reading-free probe does not beat BM25"
    return (
        "passed: every audited AUC is within the bounds or within what a feature carrying no "
        "information reaches at this sample size, and the reading-free probe does not beat "
        "BM25. Outside the bounds but within chance (the 95% range of an uninformative "
        "feature: no evidence either way): " + "; ".join(chance)
    )


def leak_verdict(audit: dict[str, Any]) -> str:
    """``passed: ...`` or ``FAILED: ...`` naming what the leak audit flagged, and the sample it
    read where a split was larger than ``release.audit_sample_rows``."""
    return _verdict(audit) + _sample_note(audit.get("sample") or {})


def _sample_note(samples: dict[str, Any]) -> str:
    read = [
        f"{split} {r['surveys']:,} of {r['of_surveys']:,} surveys ({r['rows']:,} of {r['of_rows']:,} rows)"
        for split, r in sorted(samples.items())
        if r.get("sampled")
    ]
    if not read:
        return ""
    return (
        " (audited on a sample of whole surveys, `leak_audit.sample` in eval_metadata.json: "
        + "; ".join(read)
        + ")"
    )


def _verdict(audit: dict[str, Any]) -> str:
    if audit.get("passed"):
        return passed_verdict(audit)
    tables = (audit.get("outside_bounds", {}), audit.get("relative", {}).get("outside_bounds", {}))
    flagged = [
        f"{split}: {', '.join(bad)}" for table in tables for split, bad in sorted(table.items())
    ]
    if (audit.get("reading_free_probe") or {}).get("flagged"):
        flagged.append("the reading-free probe beats BM25")
    return "FAILED: " + "; ".join(flagged)


def license_table(splits: dict[str, Any]) -> str:
    """Licence x split: surveys, and candidate corpus papers, under each paper licence."""
    names = sorted(
        {
            lic
            for s in S.SPLIT_NAMES
            for group in (splits[s].get("licenses") or {}).values()
            for lic in group
        }
    )
    rows = [
        [f"`{lic}`"]
        + [
            (splits[s].get("licenses") or {}).get(group, {}).get(lic, 0)
            for s in S.SPLIT_NAMES
            for group in ("surveys", "candidate_papers")
        ]
        for lic in names
    ]
    header = ["licence"] + [
        f"{what} ({s})" for s in S.SPLIT_NAMES for what in ("surveys", "candidate papers")
    ]
    return md_table(header, rows)


def leak_audit_table(leak: dict[str, Any]) -> str:
    """Feature x split: pooled AUC and mean per-survey AUC."""
    splits = sorted(leak.get("splits", {}))
    names = sorted({f for sp in splits for f in leak["splits"][sp]})
    header = ["feature"] + [f"{sp} {scope}" for sp in splits for scope in ("pooled", "per survey")]
    rows = [
        [f"`{n}`"]
        + [
            leak["splits"][sp].get(n, {}).get(scope)
            for sp in splits
            for scope in ("pooled", "per_survey")
        ]
        for n in names
    ]
    return md_table(header, rows)


def _beats(row: dict[str, Any]) -> str:
    """A probe table's verdict cell: a lead beyond chance, one within it (its p-value), none."""
    if row["beats"]:
        return "**yes**"
    if row.get("beats_within_chance"):
        return f"within chance (p = {row['p_value']})"
    return "no"


def probe_table(probe: dict[str, Any]) -> str:
    """The reading-free probe against BM25 on the eval split, or why it was not trained."""
    if not probe.get("metrics"):
        return f"Not trained: {probe.get('skipped', 'no train split')}."
    rows = [
        [f"`{m}`", r[probe["probe"]], r[probe["reference"]], _beats(r)]
        for m, r in probe["metrics"].items()
    ]
    header = ["metric (eval)", f"`{probe['probe']}`", f"`{probe['reference']}`", "beats"]
    return md_table(header, rows)


def textless_sections(textless: dict[str, Any]) -> str:
    """The limitation on top-level sections without text of their own: the rate measured on
    real records (from the metadata, with its source), and this release's own count when its
    records have the 2022 layout (the 2024 layout keeps no numbering to count them by)."""

    def rate(c: dict[str, Any]) -> str:
        share = c.get("share")
        return f"{int(c.get('textless') or 0):,} of {int(c.get('top_sections') or 0):,}" + (
            "" if share is None else f" (share {share:.3f})"
        )

    measured = "; ".join(f"{rate(m)} in {m['source']}" for m in textless.get("measured") or [])
    surveys, papers = textless.get("surveys") or {}, textless.get("all_papers") or {}
    here = (
        f"In this release's corpus: {rate(surveys)} numbered top-level sections of the surveys, "
        f"{rate(papers)} in all papers"
        if papers.get("top_sections")
        else "This release's records have the 2024 layout, which keeps no section numbers: "
        "there such a section leaves no trace, and its share cannot be counted"
    )
    return (
        "A top-level section whose first content is a subsection has no text of its own, and "
        "unarXive does not record its heading. In the 2022 layout it is rebuilt from its "
        "subsections' numbers and takes the role they share, not its heading's, so a survey's "
        f'textless "Background" can count as its core. Measured on real records: {measured}. '
        + here
    )


def reason_table(splits: dict[str, Any]) -> str:
    """label_reason x split: rows and their share of the split's rows (from the metadata)."""
    reasons = sorted({r for s in S.SPLIT_NAMES for r in splits[s].get("label_reasons", {})})
    header = ["label_reason"]
    for s in S.SPLIT_NAMES:
        header += [s, "share"]
    rows = []
    for r in reasons:
        row: list[Any] = [f"`{r}`"]
        for s in S.SPLIT_NAMES:
            share = splits[s].get("label_reasons_frac", {}).get(r)
            row += [
                splits[s].get("label_reasons", {}).get(r, 0),
                "" if share is None else f"{share:.3f}",
            ]
        rows.append(row)
    return md_table(header, rows)


def candidate_text_table(texts: dict[str, Any]) -> str:
    """Split x text source: positives, hard negatives, share of the split's rows."""
    rows = [
        [split, f"`{source}`", c["positives"], c["negatives"], c["share"]]
        for split, by_source in sorted(texts.items())
        for source, c in by_source.items()
    ]
    return md_table(["split", "text", "positives", "hard negatives", "share"], rows)
