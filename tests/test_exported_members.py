"""The public API is exactly what ``promptrail.__all__`` names."""

from __future__ import annotations

import promptrail


def test_all_names_are_exported_and_documented() -> None:
    public = {name for name in dir(promptrail) if not name.startswith("_")}

    assert set(promptrail.__all__) - {"__version__"} <= public
    assert promptrail.__version__
    assert promptrail.__doc__
