"""Stage ``negatives`` (reduce): hard negatives for every survey, matched to its positives
on everything visible.

* :mod:`~pipeline.stages.negatives.rules`: what may be a hard negative of a survey (the
  pools, the exclusions, the existence rule, the strata);
* :mod:`~pipeline.stages.negatives.sampling`: how negatives are drawn from the candidates
  (stable hashes, integer work keys, windows, batches, slots, matching);
* :mod:`~pipeline.stages.negatives.strategies`: ``hash`` and ``hardest``
  (``negatives.negative_sampling``);
* :mod:`~pipeline.stages.negatives.stage`: the stage, which runs them batch by batch.
"""

from pipeline.stages.negatives.stage import STAGE

__all__ = ["STAGE"]
