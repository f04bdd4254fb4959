"""The tables of online evaluation (docs/api-notes.md, "Online evaluation"): evaluator
versions, rules and decisions.

- ``evaluator_versions``: one row per version of a named evaluator. Versions never change
  once written; a change of definition is the next version.
- ``evaluation_rules``: rules are mutable, so they are kept as datasets are: a change is a
  newer row of the same key (newest ``updated_at`` wins), a delete a newer row with
  ``is_deleted = 1``; reads use ``FINAL``.
- ``evaluation_decisions``: one decision per (rule, target) survives. The key is
  (project, rule_id, target_type, target_id) and ``row_version`` orders a target's rows: a
  final decision's version is always above any ``waiting`` one (see
  :func:`collector.store.evaluation.decisions.row_version`), so a late ``waiting`` never
  replaces the final decision, and a final decision written again (a backfill) replaces the
  older one. A target's surviving decision is read with ``FINAL`` by its key.
- ``evaluation_decision_times``: every row written to ``evaluation_decisions`` (a view copies
  them), sorted by time within each rule, so a rule's page of decisions newest first and its
  counts of the last 24 hours read a range of that order instead of merging every decision of
  the rule (~70-90 ms at 1M decisions of one rule with ``FINAL`` and a sort). A row read there
  is a candidate; it is shown only if it is its target's surviving row in
  ``evaluation_decisions`` (same ``row_version``).
- ``evaluation_waiting`` (migration 44): the ``waiting`` decisions not yet replaced, in the
  same time order, so a page of ``decision=waiting`` reads those instead of walking through
  every ``waiting`` row its final decision replaced (5 in 6 candidates at 1M decisions, and
  all of a delayed rule's once it is caught up). A view writes each ``waiting`` row with
  ``sign`` 1; the decision store writes the final decision that replaces it a row of the
  same key with ``sign`` -1 (:meth:`~.decisions.DecisionStore.append`), and merges drop
  the pair. A pair not merged yet is dropped by the read (``FINAL``); a waiting row left
  by a write cut short between the two inserts is a candidate the page checks against
  ``evaluation_decisions``, as every candidate.
"""

from __future__ import annotations

from ..schema import Backfill, Table, View

EVALUATOR_VERSIONS = Table(
    name="evaluator_versions",
    columns=(
        "project String",
        "name String",
        "version UInt32",
        "definition String",  # JSON: the evaluator object (type, name, and its fields)
        "created_at DateTime64(3, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    order_by="(project, name, version)",
)

EVALUATION_RULES = Table(
    name="evaluation_rules",
    columns=(
        "project String",
        "id String",
        "name String",
        "spec String",  # JSON: every field of the rule but its id and times
        "created_at DateTime64(3, 'UTC')",
        "updated_at DateTime64(6, 'UTC')",
        "is_deleted UInt8",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at", "is_deleted"),
    order_by="(project, id)",
)

EVALUATION_DECISIONS = Table(
    name="evaluation_decisions",
    columns=(
        "project String",
        "rule_id String",
        "target_type LowCardinality(String)",  # record | trace | session
        "target_id String",
        "decision LowCardinality(String)",
        "reason String",
        "evaluator String",
        "evaluator_version UInt32",
        "score_id Nullable(String)",
        "judge_request_id Nullable(String)",
        "cost_usd Nullable(Float64)",
        "decided_at DateTime64(6, 'UTC')",
        "row_version UInt64",
    ),
    engine="ReplacingMergeTree",
    engine_args=("row_version",),
    order_by="(project, rule_id, target_type, target_id)",
    # A page resolves its ~100 candidates by key, each in a granule of its own (target ids
    # are spread over the key): small granules read ~100 x 256 rows instead of ~100 x 8,192.
    settings=("index_granularity = 256",),
)

EVALUATION_DECISION_TIMES = Table(
    name="evaluation_decision_times",
    columns=(
        "project String",
        "rule_id String",
        "decided_at DateTime64(6, 'UTC')",
        "target_type LowCardinality(String)",
        "target_id String",
        "decision LowCardinality(String)",
        "row_version UInt64",
    ),
    order_by="(project, rule_id, decided_at, target_type, target_id)",
)

EVALUATION_DECISION_TIMES_MV = View(
    name="evaluation_decision_times_mv",
    to_table="evaluation_decision_times",
    select=(
        "SELECT project, rule_id, decided_at, target_type, target_id, decision, row_version "
        "FROM {db}.evaluation_decisions"
    ),
)

EVALUATION_WAITING = Table(
    name="evaluation_waiting",
    columns=(
        "project String",
        "rule_id String",
        "decided_at DateTime64(6, 'UTC')",
        "target_type LowCardinality(String)",
        "target_id String",
        "row_version UInt64",
        "sign Int8",  # 1: a waiting decision; -1: its replacement by a final one
    ),
    engine="CollapsingMergeTree",
    engine_args=("sign",),
    order_by="(project, rule_id, decided_at, target_type, target_id)",
)

EVALUATION_WAITING_MV = View(
    name="evaluation_waiting_mv",
    to_table="evaluation_waiting",
    select=(
        "SELECT project, rule_id, decided_at, target_type, target_id, row_version, "
        "toInt8(1) AS sign FROM {db}.evaluation_decisions WHERE decision = 'waiting'"
    ),
)

# The decisions still waiting when migration 44 runs. A waiting row written while it runs may
# be copied twice (by the view and here): the read (FINAL) takes it once, and once its
# final decision's -1 is merged with the two, the one left is a candidate the page finds
# replaced and skips.
_EVALUATION_WAITING_SEED = View(
    name="evaluation_waiting_seed",
    to_table="evaluation_waiting",
    select=(
        "SELECT project, rule_id, decided_at, target_type, target_id, row_version, "
        "toInt8(1) AS sign FROM {db}.evaluation_decisions FINAL WHERE decision = 'waiting'"
    ),
)
EVALUATION_WAITING_SEED = Backfill(_EVALUATION_WAITING_SEED, EVALUATION_WAITING)
