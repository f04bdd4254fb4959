"""The audit log's one hook: every audited write appends its entry (docs/security.md).

A dependency of each route the audit table (``access/audit_routes.py``) names, after the
access check (:func:`attach`, called once where ``app.py`` builds the API); the other routes
never run it. It reads the resource's public object before the route runs, lets the route run,
and only when the route succeeded reads the object again and appends the entry, before the
answer is sent (so an admin who lists the log right after sees it). A route that fails (a
refusal, a bad body, a conflict) appends nothing.

The objects are read through the services, as the API answers them; the audit service redacts
what is secret once more. A route whose resource's id is minted by the write itself (a key, a
rule, an experiment) names it with :func:`note_created`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from typing import Any

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute, APIRouter
from pydantic import BaseModel

from ..access.audit_routes import Audited, audited
from ..errors import ContractError
from ..services.accounts.members import Actor
from ..services.container import Services
from .access import enforce, signed_in_user

_CREATED = "promptrail.audit_created"


def note_created(request: Request, resource_id: str) -> None:
    """Name the id a create route minted, for its audit entry."""
    request.scope[_CREATED] = resource_id


def attach(router: APIRouter) -> None:
    """Give each audited route of ``router`` (and of the routers it includes) the hook, before
    the app's routes are built from it.

    Only those routes: on every other one (an ingest, a read) the hook would cost a generator
    dependency per request (~25 µs p50 here) for nothing. Idempotent: the routers are module
    objects, and ``app.py`` builds the API once per variant.
    """
    for item in router.routes:
        included = getattr(item, "original_router", None)  # an included router, kept as is
        if isinstance(included, APIRouter):
            attach(included)
        elif isinstance(item, APIRoute) and _needs_hook(item):
            item.dependencies.append(Depends(audit_writes, scope="function"))


def _needs_hook(route: APIRoute) -> bool:
    hooked = any(getattr(d, "dependency", None) is audit_writes for d in route.dependencies)
    return not hooked and any(audited(method, route.path) for method in route.methods or ())


async def audit_writes(request: Request) -> AsyncIterator[None]:
    """Append the audit entry of an audited write that succeeded (see the module's doc)."""
    route: Any = request.scope.get("route")
    path = getattr(route, "path", None)
    entry = audited(request.method, path) if isinstance(path, str) else None
    if entry is None:
        yield
        return
    principal = await enforce(request)
    services: Services = request.app.state.services
    audit = services.audit
    if principal is None or audit is None:
        yield
        return
    resource_id = await _resource_id(request, entry, principal.project)
    project = principal.project
    reader = _READERS.get(entry.resource_type)
    cached = _CACHED.get(entry.resource_type)
    before = None
    if entry.before and reader is not None and resource_id:
        # From memory on the event loop when the resource is there (a prompt PATCH's is).
        before = _cached(cached, services, project, resource_id)
        if before is _MISS:
            before = await run_in_threadpool(_read, reader, services, project, resource_id)
    yield
    if entry.id_from == "created":
        resource_id = str(request.scope.get(_CREATED, ""))
    user = signed_in_user(request)

    def append(after: Any) -> None:
        if after is _MISS:
            after = _read(reader, services, project, resource_id)
        if after is None and before is None and entry.action.endswith((".create", ".put")):
            after = _body_of(request)
        audit.record(
            principal,
            entry.action,
            entry.resource_type,
            resource_id,
            before=before,
            after=after,
            ip=request.client.host if request.client else "",
            email=user.email if user else None,
        )

    after = _cached(cached, services, project, resource_id) if reader else None
    if after is not _MISS and audit.cheap(principal):
        append(after)  # nothing in it waits on the store: no hop to a worker thread
    else:
        await run_in_threadpool(append, after)


async def _resource_id(request: Request, entry: Audited, project: str) -> str:
    kind, _, name = entry.id_from.partition(":")
    if kind == "path":
        return "/".join(str(request.path_params.get(p, "")) for p in name.split("/"))
    if kind == "body":
        try:
            body = await request.json()
        except ValueError:
            return ""
        return str(body.get(name, "")) if isinstance(body, dict) else ""
    if kind == "project":
        return project
    return ""


def _body_of(request: Request) -> Any:
    """The JSON body the route took (already read by then), for a resource with no reader."""
    raw = getattr(request, "_body", b"")
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


Reader = Callable[[Services, str, str], Any]

# A cached reader answers from memory only: the object, None (known not to exist) or _MISS.
_MISS: Any = object()


def _cached(cached: Reader | None, services: Services, project: str, resource_id: str) -> Any:
    if cached is None or not resource_id:
        return _MISS
    try:
        found = cached(services, project, resource_id)
    except ContractError:
        return _MISS
    return found if found is _MISS else _json(found)


def _cached_prompt(s: Services, project: str, name: str) -> Any:
    from ..models.prompts import PromptOut

    row = s.prompts.cached_version(project, name)
    return _MISS if row is None else PromptOut.of_version(row)


def _read(reader: Reader | None, services: Services, project: str, resource_id: str) -> Any:
    """The resource's public object as JSON, or None when it does not exist (or no reader)."""
    if reader is None or not resource_id:
        return None
    try:
        return _json(reader(services, project, resource_id))
    except ContractError:
        return None


def _json(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.loads(json.dumps(value, default=_plain))


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return sorted(value, key=str)
    return str(value)


def _prompt(s: Services, project: str, name: str) -> Any:
    from ..models.prompts import PromptOut

    return PromptOut.of_version(s.prompts.resolve_version(project, name))


def _label(s: Services, project: str, ref: str) -> Any:
    name, _, label = ref.rpartition("/")
    return {
        "label": label,
        "version": s.prompts.resolve_version(project, name, None, label).version,
    }


def _dataset(s: Services, project: str, name: str) -> Any:
    from ..models.datasets import DatasetOut

    return DatasetOut.of(s.datasets.get(project, name))


def _rule(s: Services, project: str, rule_id: str) -> Any:
    from .routes.evaluation_rules import rule_out

    return rule_out(s.evaluation.rules.get(project, rule_id))


def _member(s: Services, project: str, email: str) -> Any:
    owner = Actor("owner")
    members = s.accounts.members.list(project, owner)
    return next((m for m in members if m.email.lower() == email.lower()), None)


def _user(s: Services, project: str, email: str) -> Any:
    user = s.accounts.users.find(email)
    if user is None:
        return None
    return {
        "id": user.id,
        "email": user.email,
        "name": user.name,
        "disabled": user.disabled,
        "instance_admin": user.instance_admin,
    }


def _key(s: Services, project: str, key_id: str) -> Any:
    return next((k for k in s.keys.list_keys(project, True) if k.key_id == key_id), None)


_CACHED: Mapping[str, Reader] = {"prompt": _cached_prompt}

_READERS: Mapping[str, Reader] = {
    "prompt": _prompt,
    "label": _label,
    "connection": lambda s, p, name: s.connections.get(p, name),
    "dataset": _dataset,
    "evaluator": lambda s, p, name: s.evaluation.evaluators.resolve(p, name),
    "rule": _rule,
    "member": _member,
    "protected_labels": lambda s, p, _: {"labels": list(s.protected_labels.get(p).labels)},
    "user": _user,
    "key": _key,
}
