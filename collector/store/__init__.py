"""ClickHouse only: connections, schema, migrations and every SQL statement of the collector."""
