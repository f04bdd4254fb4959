"""Experiments (docs/api-notes.md, "Datasets and experiments"): a prompt version run over a
dataset on the service, or results posted by the client's code; their summaries and
comparisons.

- :mod:`.service`: the rules between the routes and the store (create, cancel, complete,
  results of the client's code, reads).
- :mod:`.runner`: the background job that runs an experiment on the service.
- :mod:`.results`: what an experiment writes (results, their records, verdicts as scores).
- :mod:`.summaries`: counts and summaries, computed from the stored results on every read.
- :mod:`.comparison`: two experiments paired by item, and the cache of finished pairs.
"""

from ...store.experiments import ExperimentRow  # what the service's reads return
from .comparison import ComparePage
from .results import eval_score_id
from .service import ExperimentService, new_experiment_id
from .summaries import EMPTY_SUMMARY, Computed, summary_of

__all__ = [
    "EMPTY_SUMMARY",
    "ComparePage",
    "Computed",
    "ExperimentRow",
    "ExperimentService",
    "eval_score_id",
    "new_experiment_id",
    "summary_of",
]
