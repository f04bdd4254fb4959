"""The promptrail collector: the ``/v1`` REST API on ClickHouse (``promptrail.collector``)."""
