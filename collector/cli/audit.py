"""``promptrail audit verify``: recompute the audit log's hash chain (docs/security.md).

promptrail audit verify [--data-dir DIR]

It opens the store itself (the embedded data dir with no collector running, or a ClickHouse
server named by ``PROMPTRAIL_STORE_URL``); while a collector holds the embedded data dir it
asks that collector (its loopback admin route), which runs the same check on its store. It
prints how many entries it checked and the newest entry's hash (keep it elsewhere: a chain cut
short at its newest end is only found against a head kept outside the store); a chain that
does not match exits 1 naming its first bad entry.
"""

from __future__ import annotations

from typing import Any

import httpx

from ..runtime_file import RuntimeInfo, read_runtime
from .shared import DataDir, console, fail, first_line, group, open_store, settings_for

# Attached to the root app as ``audit`` (root.py).
app = group("Check the audit log.")


@app.command("verify")
def verify(data_dir: DataDir = None) -> None:
    """Recompute the audit log's chain; exit 1 naming the first entry that does not match."""
    settings = settings_for(data_dir)
    running = read_runtime(settings.data_dir) if settings.is_embedded else None
    verdict = _via_collector(running) if running else _on_store(settings)
    problem = verdict.get("problem")
    if problem:
        raise fail(
            f"audit entry {problem['seq']} ({problem['id']}) does not match: {problem['reason']}; "
            f"{verdict['checked']} entries before it match"
        )
    console.print(f"audit log verified: {verdict['checked']} entries, head {verdict['head']}")


def _on_store(settings: Any) -> dict[str, Any]:
    from ..services.audit import verify_chain
    from ..store.audit import AuditStore

    with open_store(settings) as store:
        try:
            audit = AuditStore(store.client, store.database, store.cluster, settings.store_url)
            try:
                verdict = verify_chain(audit.walk())
            finally:
                audit.close()
        except Exception as exc:
            raise fail(f"the store {settings.store_url} failed: {first_line(exc)}") from None
    return verdict.as_json()


def _via_collector(running: RuntimeInfo) -> dict[str, Any]:
    try:
        response = httpx.get(
            f"{running.url}/v1/admin/audit/verify",
            headers={"X-Promptrail-Admin": running.admin_token},
            timeout=600,
        )
    except httpx.HTTPError as exc:
        raise fail(f"the collector at {running.url} did not answer: {exc}") from None
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.is_error or not isinstance(answer, dict) or "data" not in answer:
        raise fail(f"the collector answered {response.status_code}")
    data: dict[str, Any] = answer["data"]
    return data
