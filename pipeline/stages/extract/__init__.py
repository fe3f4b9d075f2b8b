"""Stage ``extract`` (map): unarXive JSONL -> papers, references, mentions, sections, rejects.

* :mod:`~pipeline.stages.extract.records`: the typed msgspec records, the decoder, and how
  a record's values are read;
* :mod:`~pipeline.stages.extract.structure`: a paper's section occurrences and their
  top-level sections (every occurrence, cited or not, is a row of ``sections``, so later
  stages see the whole structure of a paper: ``pipeline.rules.roles`` infers roles from it);
* :mod:`~pipeline.stages.extract.rows`: a batch's rows and the thread that writes them;
* :mod:`~pipeline.stages.extract.driver`: the stage, file by file, and its totals.
"""

from pipeline.stages.extract.driver import STAGE

__all__ = ["STAGE"]
