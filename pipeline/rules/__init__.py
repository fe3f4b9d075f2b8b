"""The benchmark's domain rules, shared by the stages: identifiers and aliases, section
roles, survey detection, titles, candidate text, what a system sees without reading
(:mod:`~pipeline.rules.visible`) and its audit, and the extract readers that keep one
copy of a paper (:mod:`~pipeline.rules.tables`)."""
