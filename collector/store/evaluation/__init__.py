"""Online evaluation's store (docs/api-notes.md, "Online evaluation"): evaluator versions,
rules (:mod:`.definitions`) and decisions (:mod:`.decisions`); the tables in :mod:`.tables`."""

from .decisions import WAITING, DecisionRow, DecisionStore, row_version
from .definitions import EvaluationStore, EvaluatorVersionRow, RuleRow
from .tables import (
    EVALUATION_DECISION_TIMES,
    EVALUATION_DECISION_TIMES_MV,
    EVALUATION_DECISIONS,
    EVALUATION_RULES,
    EVALUATION_WAITING,
    EVALUATION_WAITING_MV,
    EVALUATION_WAITING_SEED,
    EVALUATOR_VERSIONS,
)

__all__ = [
    "EVALUATION_DECISIONS",
    "EVALUATION_DECISION_TIMES",
    "EVALUATION_DECISION_TIMES_MV",
    "EVALUATION_RULES",
    "EVALUATION_WAITING",
    "EVALUATION_WAITING_MV",
    "EVALUATION_WAITING_SEED",
    "EVALUATOR_VERSIONS",
    "WAITING",
    "DecisionRow",
    "DecisionStore",
    "EvaluationStore",
    "EvaluatorVersionRow",
    "RuleRow",
    "row_version",
]
