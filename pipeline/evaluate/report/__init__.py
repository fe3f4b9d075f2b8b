"""What an evaluation writes for people and other tools: the Markdown report
(:mod:`.markdown`), its figures (:mod:`.figures`, drawn by :mod:`.plots`) and a split
exported as BEIR files (:mod:`.export`)."""
