"""Which writes the audit log records: one entry per audited route, beside the access table.

Each entry names the action and resource type its audit entry carries and where the resource's
id comes from. ``api/audit_hook.py`` reads it on every request (a dictionary look-up); a route
not named here (reads, records, OTLP spans, scores, runs) appends nothing (docs/security.md,
"Audit log").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Audited:
    """The audit entry of one write route.

    ``id_from``: ``path:<param>`` (the route's path parameter), ``path:<a>/<b>`` (two joined
    by ``/``), ``body:<field>`` (a field of the JSON body, for a create), ``project`` (the
    project itself) or ``created`` (the id the route names with :func:`note_created`).
    ``before``: whether the resource is read before the write (not for creates and actions
    whose resource has no reader).
    """

    action: str
    resource_type: str
    id_from: str
    before: bool = True


AUDITED: Mapping[str, Mapping[str, Audited]] = {
    "POST": {
        "/v1/prompts": Audited("prompt.create", "prompt", "body:name", before=False),
        "/v1/prompts/{name}/rollback": Audited("prompt.rollback", "prompt", "path:name"),
        "/v1/datasets": Audited("dataset.create", "dataset", "body:name", before=False),
        "/v1/datasets/{name}/items": Audited("dataset.add_items", "dataset", "path:name"),
        "/v1/datasets/{name}/items/from-requests": Audited(
            "dataset.add_items", "dataset", "path:name"
        ),
        "/v1/experiments": Audited("experiment.create", "experiment", "created", before=False),
        "/v1/experiments/{id}/cancel": Audited(
            "experiment.cancel", "experiment", "path:id", before=False
        ),
        "/v1/experiments/{id}/complete": Audited(
            "experiment.complete", "experiment", "path:id", before=False
        ),
        "/v1/connections": Audited("connection.create", "connection", "body:name", before=False),
        "/v1/evaluation-rules": Audited("rule.create", "rule", "created", before=False),
        "/v1/evaluation-rules/{id}/backfill": Audited("rule.backfill", "rule", "path:id"),
        "/v1/projects": Audited("project.create", "project", "body:name", before=False),
        "/v1/users/accounts": Audited("user.create", "user", "body:email", before=False),
        "/v1/keys": Audited("key.create", "key", "created", before=False),
    },
    "PUT": {
        "/v1/prompts/{name}/labels/{label}": Audited("label.move", "label", "path:name/label"),
        "/v1/score-configs/{name}": Audited("score_config.put", "score_config", "path:name"),
        "/v1/evaluators/{name}": Audited("evaluator.put", "evaluator", "path:name"),
        "/v1/projects/{project}/members/{email}": Audited("member.put", "member", "path:email"),
        "/v1/projects/{project}/protected-labels": Audited(
            "protected_labels.put", "protected_labels", "project"
        ),
    },
    "PATCH": {
        "/v1/prompts/{name}": Audited("prompt.update", "prompt", "path:name"),
        "/v1/users/accounts/{email}": Audited("user.update", "user", "path:email"),
        "/v1/connections/{name}": Audited("connection.update", "connection", "path:name"),
        "/v1/evaluation-rules/{id}": Audited("rule.update", "rule", "path:id"),
    },
    "DELETE": {
        "/v1/prompts/{name}": Audited("prompt.delete", "prompt", "path:name"),
        "/v1/prompts/{name}/labels/{label}": Audited("label.remove", "label", "path:name/label"),
        "/v1/requests": Audited("requests.delete", "requests", "project", before=False),
        "/v1/datasets/{name}": Audited("dataset.delete", "dataset", "path:name"),
        "/v1/datasets/{name}/items/{item_id}": Audited(
            "dataset_item.delete", "dataset_item", "path:name/item_id", before=False
        ),
        "/v1/connections/{name}": Audited("connection.delete", "connection", "path:name"),
        "/v1/evaluation-rules/{id}": Audited("rule.delete", "rule", "path:id"),
        "/v1/projects/{project}/members/{email}": Audited("member.remove", "member", "path:email"),
    },
}


def audited(method: str, route_path: str) -> Audited | None:
    """The audit entry of an API route (its path without ``/v1``), or None: not audited."""
    return AUDITED.get(method, {}).get("/v1" + route_path)
