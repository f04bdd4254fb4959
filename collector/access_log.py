"""The access log names the route of each request, never what its query string carried,
nor the feedback token in a feedback route's path.

A query string holds a user's data: search terms (``/v1/requests/search?query=...``),
metadata filter values (``?metadata.user_id=...``), dates. uvicorn logs the whole request
line, so a filter on its access logger cuts the query string off before any handler writes it.
"""

from __future__ import annotations

import logging

# What replaces a query string: the line still says there was one.
_REDACTED = "?…"
_TOKEN_PATHS = ("/v1/feedback/", "/api/v1/feedback/")


class DropQueryStrings(logging.Filter):
    """Rewrite uvicorn's access records (client, method, path, version, status) without query."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep the record, its path cut at ``?``."""
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            path = args[2]
            if "?" in path:
                path = path.split("?", 1)[0] + _REDACTED
            # A feedback token in the path is a credential (docs/security.md): cut it too.
            for prefix in _TOKEN_PATHS:
                if path.startswith(prefix):
                    path = prefix + "…"
            record.args = (args[0], args[1], path, *args[3:])
        return True


def redact_access_log() -> None:
    """Install :class:`DropQueryStrings` on uvicorn's access logger (idempotent)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, DropQueryStrings) for f in access.filters):
        access.addFilter(DropQueryStrings())
