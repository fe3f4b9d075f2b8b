"""Bibliographies of generated surveys scored against the expert's reading lists
(``evaluate --bibliography``): reading the input formats (:mod:`.formats`), resolving and
scoring them (:mod:`.score`), the baselines' bibliographies (:mod:`.baselines`), coverage of
the survey's aspects (:mod:`.aspects`) and the results file (:mod:`.report`)."""
