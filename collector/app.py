"""Assemble the collector: store, services, middleware, error handlers and routes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import cache
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool
from starlette.routing import BaseRoute

from promptrail import __version__

from .api.access import check_access
from .api.audit_hook import attach as attach_audit
from .api.backpressure import IngestGateMiddleware
from .api.body_size import BodyLimitMiddleware
from .api.cors import FeedbackCorsMiddleware
from .api.errors import install_error_handlers
from .api.routes import (
    accounts,
    admin,
    admin_backups,
    audit,
    auth,
    connections,
    datasets,
    environments,
    evaluation_rules,
    evaluator_trials,
    evaluators,
    experiments,
    exports,
    faults,
    health,
    keys,
    labels,
    members,
    oidc,
    playground,
    projects,
    prompts,
    protected_labels,
    requests,
    runs,
    scores,
    sessions,
    templates,
    traces,
    users,
    versions,
)
from .config import Settings
from .console import install_console
from .models.envelopes import ERROR_RESPONSES
from .services.container import Services
from .store.database import Store

logger = logging.getLogger("promptrail.collector")

ReadyHook = Callable[[Services, str | None], None]


def _api_router() -> APIRouter:
    # Every route's access check (api/access.py), before anything of the route runs.
    router = APIRouter(responses=ERROR_RESPONSES, dependencies=[Depends(check_access)])
    # Template routes first: their paths are longer forms of the version routes.
    for module in (
        prompts,
        templates,
        runs,
        versions,
        labels,
        exports,
        requests,
        environments,
        traces,
        sessions,
        users,
        scores,
        datasets,
        experiments,
        admin,
        admin_backups,
        connections,
        evaluators,
        evaluation_rules,
        keys,
        protected_labels,
        playground,
        evaluator_trials,
    ):
        router.include_router(module.router)
    router.include_router(scores.feedback_router)
    for module in (auth, projects, members, accounts, oidc):
        router.include_router(module.router)
    router.include_router(accounts.admin_router)
    router.include_router(audit.router)
    router.include_router(audit.admin_router)
    # The audit log's hook (api/audit_hook.py) on the audited writes only, after the check.
    attach_audit(router)
    return router


@cache
def _routes(fault_injection: bool) -> tuple[BaseRoute, ...]:
    """The health route and the API under ``/v1`` and ``/api/v1``, built once per process.

    FastAPI resolves an included router's routes (their dependencies, request and response
    models: a pydantic schema each) on the app's first request, once per app. A process that
    makes several apps (the test suite makes one per test; a collector makes one) would pay
    that again for each, so the included routers are made once, on a router of their own, and
    every app lists the same objects. What they hold does not depend on the app: a request
    finds its app in its scope, and the collector uses no ``dependency_overrides`` (an include
    into an app would read them from that app; these routes see none).
    """
    routes = APIRouter()
    routes.include_router(health.router)
    api = _api_router()
    if fault_injection:
        api.include_router(faults.router)
    routes.include_router(api, prefix="/v1")
    routes.include_router(api, prefix="/api/v1", include_in_schema=False)
    return tuple(routes.routes)


def open_services(settings: Settings) -> tuple[Services, str | None]:
    """Open and migrate the store, make sure the initial key exists; return any new key."""
    store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    try:
        services = Services.build(settings, store)
    except BaseException:
        store.close()
        raise
    # A start refused here (a bad initial admin, say) closes what it opened: the embedded
    # store's shared writers and journals are held per database for as long as any user has
    # them, and a process that goes on (a supervisor, a test) would otherwise keep them.
    try:
        new_key = None
        if settings.init_api_key:
            services.keys.ensure(settings.init_api_key)
        elif settings.is_embedded and not services.keys.has_keys("default"):
            new_key = services.keys.create("default", created_by="start-up")
        if settings.init_admin_email and settings.init_admin_password:
            services.accounts.ensure_initial_admin(
                settings.init_admin_email, settings.init_admin_password.get_secret_value()
            )
    except BaseException:
        services.close()
        raise
    return services, new_key


def create_app(
    settings: Settings | None = None,
    on_ready: ReadyHook | None = None,
    opened: tuple[Services, str | None] | None = None,
) -> FastAPI:
    """Build the collector app.

    The store opens (and migrates) in the lifespan, unless the caller opened it already
    (``opened``, from :func:`open_services`); either way the lifespan closes it.
    """
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if opened is None:
            services, new_key = await run_in_threadpool(open_services, settings)
        else:
            services, new_key = opened
        app.state.services = services
        logger.info("store ready: %s (database %s)", settings.store_url, settings.database)
        if on_ready is not None:
            on_ready(services, new_key)
        services.start()
        if services.evaluation_worker is not None:
            services.evaluation_worker.start()
        try:
            yield
        finally:
            if services.evaluation_worker is not None:
                await services.evaluation_worker.stop()
            services.close()
            await services.runs.wait_closed()
            logger.info("store closed")

    # /docs and /redoc load their scripts and styles from the collector itself (the pinned
    # fastapi-offline package), not from a CDN: they work offline and in air-gapped networks.
    app = FastAPIOffline(
        title="promptrail collector",
        version=__version__,
        description="Prompt registry and LLM request log. Every route is served under "
        "both /v1 and /api/v1.",
        lifespan=lifespan,
        static_url="/docs/assets",
        favicon_url="/docs/assets/favicon.png",
        # Swagger UI would otherwise send the document to validator.swagger.io for a badge.
        swagger_ui_parameters={"validatorUrl": None},
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    # Outside the body limit, which reads gzip bodies: a refused request's body is never read.
    app.add_middleware(IngestGateMiddleware)
    # Outermost: the feedback route's preflight and its every answer, errors included.
    app.add_middleware(FeedbackCorsMiddleware)
    install_error_handlers(app)
    install_console(app)
    app.router.routes.extend(_routes(settings.fault_injection))
    _document_real_errors(app)
    return app


def _document_real_errors(app: FastAPI) -> None:
    """Drop FastAPI's default 422 from the OpenAPI document: validation answers 400."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            schemas = schema.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
