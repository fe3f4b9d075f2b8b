"""Stage ``works`` (reduce): one canonical id per cited work, every bib entry resolved.

* :mod:`~pipeline.stages.works.identity`: which identifiers name one work (the alias
  graph, its junk guard, its connected components and their canonical key);
* :mod:`~pipeline.stages.works.by_title`: resolution by title of the entries without an
  identifier;
* :mod:`~pipeline.stages.works.dates`: a work's known date and where it comes from;
* :mod:`~pipeline.stages.works.partials`: per-work partials (an example raw string, the
  citing papers, the parsed title), combined every few files;
* :mod:`~pipeline.stages.works.passes`: the three passes over the reference files, one
  file at a time;
* :mod:`~pipeline.stages.works.stage`: the stage, which runs the passes around the graph
  and writes its tables.
"""

from pipeline.stages.works.stage import STAGE

__all__ = ["STAGE"]
