"""What the SDK's closable objects share: ``with`` ends in ``close()``, ``async with`` in
``aclose()`` (clients and run streams)."""

from __future__ import annotations

from typing import Self


class Closing:
    """Close on leaving a ``with`` block."""

    def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClosing:
    """Close (``await aclose()``) on leaving an ``async with`` block."""

    async def aclose(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
