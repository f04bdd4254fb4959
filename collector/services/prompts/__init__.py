"""The prompt registry's rules, and the two caches in front of its store reads.

``service.py`` joins the rules into :class:`PromptService`: addressing in ``base.py``, a
version's fields in ``fields.py``, creates, new versions and deletes in ``writes.py``, labels
in ``labels.py``, reads and the list in ``reads.py``. ``version_cache.py`` and ``live_ids.py``
answer hot lookups without a query on the embedded store; ``encoded.py`` keeps answer bodies.
"""

from ...models.prompts import public_id
from .service import PromptService

__all__ = ["PromptService", "public_id"]
