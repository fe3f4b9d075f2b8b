"""Stage ``release`` (reduce): the files published on the Hub, in ``<out>/release/``.

* ``{split}_survey_reading_lists.parquet``: one row per (survey, candidate), columns
  ``schema.READING_LISTS``, sorted by (survey_id, candidate_id).
* ``qrels/``, ``corpus/``, ``queries/``, ``top_ranked/`` ``{train,test}.parquet``: the same
  data in MTEB's retrieval/re-ranking layout (explicit score-0 qrels for hard negatives;
  ``top_ranked``: each query's candidate ids), the eval split named ``test`` as MTEB's
  and BEIR's loaders ask (:data:`pipeline.core.release_files.RETRIEVAL_SPLITS`).
* ``aspects/``: the section-level reading lists (stage ``aspects`` says what
  an aspect is), laid out as a release of its own: ``{split}_survey_reading_lists.parquet`` (one
  row per (aspect, candidate), ``schema.ASPECT_READING_LISTS``, sorted by (aspect_id,
  candidate_id)) and its answer-free view ``candidates/{split}.parquet``
  (``schema.ASPECT_CANDIDATES_VIEW``); a split without aspects is not written. Their leak
  audit (:func:`aspect_audit_meta`) is ``aspects.leak_audit`` in the metadata.
* ``eval_metadata.json``: counts, audit, resolved config, input revision, code
  version, sha256 and row count of every Parquet file.
* ``README.md``: the dataset card (:mod:`pipeline.hub.card`)
  with numbers taken from the metadata.

The modules, one job each:

* :mod:`~pipeline.stages.release.tables`: the reading-list rows, their BEIR views, the
  aspect rows and the works table;
* :mod:`~pipeline.stages.release.splits`: each split written a batch of surveys at a time,
  with the audit values of what was written;
* :mod:`~pipeline.stages.release.counts`: the counts the metadata records;
* :mod:`~pipeline.stages.release.audit`: the leak audit of the reading lists and the
  aspects, and its one verdict;
* :mod:`~pipeline.stages.release.metadata`: ``eval_metadata.json`` and the card;
* :mod:`~pipeline.stages.release.stage`: the stage, which runs them in that order.

A split without surveys is not written (``datasets`` cannot read a Parquet file with
no rows) and is left out of the card's ``configs``; its counts are 0 in the metadata.
The runner's ``_SUCCESS.json`` is not a release file (it holds timings) and is never
pushed.

Column rules:

* ``in_domain`` (non-null bool): the candidate is a corpus paper whose own arXiv
  categories include the survey's primary category. Every other candidate is
  ``False``, including works outside the corpus, whose categories are unknown (not
  shown to be in domain). It is computed from the candidate's own metadata only, never
  from which surveys cite it, so it does not tell positives from hard negatives: the
  ``citing_survey_category`` negatives (works outside the corpus, and corpus papers of
  other categories) are all out of domain, like the positives outside the survey's
  category.
* ``n_citing_surveys``, ``candidate_prior_citations``: other detected surveys and distinct
  corpus papers citing the work, posted before the survey, for positives and negatives
  alike (the survey itself never counts). Judgment-side (``schema.POPULARITY_COLUMNS``):
  in the reading lists, not in the candidates view. The date rule is :mod:`pipeline.rules.visible`'s
  (citers by their first version, the survey by its text date; the card's "Dates").
* ``candidate_date`` is the work's ``known_date``.
* ``candidate_title`` is the title of the work's OpenAlex record, else a corpus paper's own
  title, else the work's ``parsed_title`` (``works``: the most common title key of the bib
  strings citing it), so a work is shown in one canonical form whoever cited it
  (:mod:`pipeline.rules.described`, which also labels where each shown text came from). ``candidate_raw`` (one
  citing paper's bib string, with that paper's style) is in the reading lists, on the
  judgment side, and not in the ``candidates`` view or the BEIR corpus: its formatting
  tells whose bibliography it came from (the card, "Candidate text").
* Missing text is ``''`` in every config, never null (``schema.TEXT_COLUMNS``).
* ``survey_license``, ``candidate_license``: the papers' own licences (``extract``'s
  ``license``; null for a work outside the corpus), in ``reading_lists`` only.

Everything written is deterministic: sorted rows, Parquet with fixed options, JSON
with sorted keys, no timestamps and no absolute paths.
"""

from pipeline.stages.release.stage import STAGE

__all__ = ["STAGE"]
