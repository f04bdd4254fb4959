"""Online evaluation (docs/api-notes.md, "Online evaluation"): named, versioned evaluators
shared by experiments and rules, the rules that run them on production data, and the one
decision each rule makes on each matching target.

- :mod:`.evaluators`: PUT makes a new version; experiments resolve references to them.
- :mod:`.rules`: rules' CRUD, checked whole on every write.
- :mod:`.decisions`: ``decide`` (what the worker calls) and the decisions' list.
- :mod:`.sampling`: the deterministic sample of a rule's targets.
"""

from __future__ import annotations

from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from ...store.evaluation import DecisionStore, EvaluationStore
from ...store.evaluation_work import EvaluationWorkStore
from .decisions import DecisionService
from .evaluators import EvaluatorService
from .rules import Rule, RuleService
from .sampling import in_sample, sample_point


@dataclass(frozen=True)
class Evaluation:
    """Online evaluation's services, over one store."""

    evaluators: EvaluatorService
    rules: RuleService
    decisions: DecisionService
    work: EvaluationWorkStore
    decision_store: DecisionStore

    @classmethod
    def build(
        cls,
        client: Client,
        database: str,
        cluster: str | None,
        cursor_secret: str,
        retry_after_seconds: int,
    ) -> Evaluation:
        """Wire the services over the store's client."""
        store = EvaluationStore(client, database, cluster)
        decision_store = DecisionStore(client, database, cluster)
        evaluators = EvaluatorService(store, retry_after_seconds)
        rules = RuleService(
            store,
            decision_store,
            evaluators,
            cursor_secret,
            retry_after_seconds,
        )
        work = EvaluationWorkStore(client, database, cluster)
        decisions = DecisionService(
            decision_store, rules, cursor_secret, retry_after_seconds, work=work
        )
        return cls(evaluators, rules, decisions, work, decision_store)


__all__ = [
    "DecisionService",
    "Evaluation",
    "EvaluatorService",
    "Rule",
    "RuleService",
    "in_sample",
    "sample_point",
]
