"""Dependencies: the services of the running app and the caller's project."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ..config import Settings
from ..services.analytics import AnalyticsService
from ..services.exports import ExportService
from ..services.ingest import IngestService
from ..services.keys import KeyService
from ..services.prompts import PromptService
from ..services.requests import RequestService
from ..store.store import Store


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
    exports: ExportService

    @classmethod
    def build(cls, settings: Settings, store: Store) -> Services:
        """Wire services over a store (start background work with :meth:`start`)."""
        return cls(
            settings=settings,
            store=store,
            keys=KeyService(store.keys),
            prompts=PromptService(store.prompts, settings.cursor_secret),
            ingest=IngestService(
                store.requests,
                buffered=store.is_embedded,
                max_batch_records=settings.max_batch_records,
            ),
            requests=RequestService(store.requests, settings.cursor_secret),
            analytics=AnalyticsService(store.analytics),
            exports=ExportService(
                store.exports,
                settings.exports_path,
                timedelta(days=settings.export_retention_days),
            ),
        )

    def start(self) -> None:
        """Start background work: export jobs and their maintenance."""
        self.exports.start(sole_runner=self.store.is_embedded)

    def close(self) -> None:
        """Flush pending records, stop background work, close the store."""
        self.ingest.close()
        self.exports.close()
        self.store.close()


def get_services(request: Request) -> Services:
    """Return the app's services."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: <API key>")


def current_project(
    services: ServicesDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> str:
    """Authenticate the request by either header; return the project of its key."""
    return services.keys.authenticate((bearer.credentials if bearer else None) or api_key)


Project = Annotated[str, Depends(current_project)]
