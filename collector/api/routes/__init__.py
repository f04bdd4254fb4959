"""One module per resource of the ``/v1`` API."""
