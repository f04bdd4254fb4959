"""The prompt registry's rules, and the two caches in front of its store reads.

``service.py`` holds the rules (versions, labels, rollback); ``version_cache.py`` and
``live_ids.py`` answer hot lookups without a query on the embedded store.
"""

from ...models.prompts import public_id
from .service import PromptService

__all__ = ["PromptService", "public_id"]
