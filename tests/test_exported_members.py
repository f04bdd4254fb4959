"""The public API is exactly what ``promptrail.__all__`` names."""

from __future__ import annotations

import promptrail


def test_all_names_are_exported_and_documented() -> None:
    public = {name for name in dir(promptrail) if not name.startswith("_")}

    assert set(promptrail.__all__) - {"__version__"} <= public
    assert promptrail.__version__
    assert promptrail.__doc__


def test_capture_api_is_exported() -> None:
    capture = {"init", "instrument", "uninstrument", "observe", "context", "Context", "flush"}

    assert capture <= set(promptrail.__all__)
    assert isinstance(promptrail.context(user_id="u1"), promptrail.Context)
    assert promptrail.context.__doc__
