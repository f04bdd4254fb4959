"""Dependencies: the services of the running app and the caller's project."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ..config import Settings
from ..errors import InvalidApiKey
from ..providers import HttpPolicy, Provider, ProviderEndpoint
from ..providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from ..providers.anthropic import AnthropicProvider
from ..providers.openai import DEFAULT_BASE_URL as OPENAI_BASE_URL
from ..providers.openai import OpenAIProvider
from ..services.analytics import AnalyticsService
from ..services.backups import BackupService
from ..services.exports import ExportService
from ..services.helpers.live_ids import LiveIdIndex
from ..services.helpers.pending_writes import PendingWrites
from ..services.helpers.version_cache import VersionCache
from ..services.ingest import Backpressure, IngestService
from ..services.keys import KeyCache, KeyService
from ..services.otlp import OtlpService
from ..services.pricing import GenaiPriceBook
from ..services.prompts import PromptService
from ..services.rate_limits import ProjectLimits
from ..services.requests import RequestService
from ..services.rollups import RollupService
from ..services.runs import RunService
from ..store.table_groups import Store


@dataclass
class Services:
    """Everything a route may call, built once per app."""

    settings: Settings
    store: Store
    keys: KeyService
    prompts: PromptService
    ingest: IngestService
    requests: RequestService
    analytics: AnalyticsService
    rollups: RollupService
    exports: ExportService
    backups: BackupService
    runs: RunService
    otlp: OtlpService
    pending: PendingWrites
    limits: ProjectLimits

    @classmethod
    def build(cls, settings: Settings, store: Store) -> Services:
        """Wire services over a store (start background work with :meth:`start`)."""
        # Both are exact only where this process is the store's only writer.
        prompts = PromptService(
            store.prompts,
            settings.cursor_secret,
            VersionCache(enabled=store.is_embedded),
            LiveIdIndex(enabled=store.is_embedded),
        )
        prices = GenaiPriceBook()  # one price book: runs and every ingest path price alike
        ingest = IngestService(
            store.requests,
            buffered=store.is_embedded,
            max_batch_records=settings.max_batch_records,
            prices=prices,
            writer=store.request_writes,
            backpressure=Backpressure(
                buffer_bytes=settings.ingest_buffer_bytes,
                wait_seconds=settings.ingest_wait_seconds,
                retry_after_seconds=settings.store_retry_after_seconds,
            ),
        )
        pending = PendingWrites()
        rollups = RollupService(
            store.rollups,
            settle=timedelta(seconds=settings.rollup_settle_seconds),
            interval=settings.rollup_interval_seconds,
        )
        return cls(
            settings=settings,
            store=store,
            # Every collector on an embedded store lives in this process: they share the
            # cache of checked keys, which a revocation clears (services/keys.py).
            keys=KeyService(
                store.keys,
                KeyCache.shared(settings.store_url, store.database) if store.is_embedded else None,
            ),
            prompts=prompts,
            ingest=ingest,
            requests=RequestService(store.requests, settings.cursor_secret, pending),
            analytics=AnalyticsService(store.analytics, rollups, pending),
            rollups=rollups,
            exports=ExportService(
                store.exports,
                settings.exports_path,
                timedelta(days=settings.export_retention_days),
                pending,
            ),
            backups=BackupService(store.backups, settings.exports_path, store.is_embedded),
            runs=RunService(prompts, ingest, _providers(settings), prices, pending),
            otlp=OtlpService(ingest),
            pending=pending,
            limits=ProjectLimits(
                settings.limit_requests,
                settings.limit_records,
                settings.limit_bytes,
                settings.project_limits,
            ),
        )

    def start(self) -> None:
        """Start background work: exports and their upkeep, the rollup's sealer, keys' last use."""
        self.exports.start(sole_runner=self.store.is_embedded)
        self.rollups.start()
        self.keys.start()

    def close(self) -> None:
        """Close provider clients, flush records, stop background work, close the store."""
        self.runs.close()
        self.pending.close()
        self.ingest.close()
        self.exports.close()
        self.rollups.close()
        self.keys.close()
        self.store.close()


def _providers(settings: Settings) -> dict[str, Provider]:
    """Build one pooled client per model provider, as the settings configure them."""
    policy = HttpPolicy(
        connect_timeout=settings.provider_connect_timeout,
        read_timeout=settings.provider_read_timeout,
        max_retries=settings.provider_max_retries,
        retry_base_delay=settings.provider_retry_base_delay,
        retry_max_delay=settings.provider_retry_max_delay,
        max_connections=settings.provider_max_connections,
    )
    openai_key = settings.openai_api_key
    anthropic_key = settings.anthropic_api_key
    return {
        "openai": OpenAIProvider(
            ProviderEndpoint(
                settings.openai_base_url or OPENAI_BASE_URL,
                openai_key.get_secret_value() if openai_key else None,
            ),
            policy,
        ),
        "anthropic": AnthropicProvider(
            ProviderEndpoint(
                settings.anthropic_base_url or ANTHROPIC_BASE_URL,
                anthropic_key.get_secret_value() if anthropic_key else None,
            ),
            policy,
        ),
    }


# The dependencies are ``async def`` because FastAPI runs a plain ``def`` dependency on its
# thread pool, a thread hop per dependency per request; they block only on a store query.
async def get_services(request: Request) -> Services:
    """Return the app's services."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: <API key>")


def key_from_headers(headers: Mapping[str, str]) -> str | None:
    """Return the API key of a request: ``Authorization: Bearer`` first, then ``X-API-Key``.

    Raise INVALID_API_KEY saying to add ``Bearer `` when the only key sent is an
    ``Authorization`` header without that scheme (``Authorization: pr-...``): the key was
    there, so "missing" would mislead.
    """
    authorization = headers.get("authorization", "").strip()
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    api_key = headers.get("x-api-key") or None
    if api_key is None and authorization and scheme.lower() != "bearer":
        raise InvalidApiKey(
            "The Authorization header needs the Bearer scheme: send "
            "'Authorization: Bearer <key>' (add 'Bearer ' before the key), or 'X-API-Key: <key>'"
        )
    return api_key


async def current_project(
    request: Request,
    services: ServicesDep,
    # Read by key_from_headers; declared so that the OpenAPI schema shows both schemes.
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> str:
    """Authenticate the request by either header; return the project of its key.

    The project's request rate is counted here, once its key is known: a request without a
    valid key is refused (401) before it can count against any project.
    """
    raw = key_from_headers(request.headers)
    project = services.keys.known_project(raw)
    if project is None:
        project = await run_in_threadpool(services.keys.authenticate, raw)
    services.limits.admit_request(project)
    return project


Project = Annotated[str, Depends(current_project)]


async def ingest_project(project: Project, services: ServicesDep) -> str:
    """The caller's project, refused (429) while it has used up an ingest volume window.

    The ingest route counts what it took with ``services.limits.charge_ingest``.
    """
    services.limits.admit_ingest(project)
    return project


IngestProject = Annotated[str, Depends(ingest_project)]
