"""Provider patches and OpenTelemetry glue (shipped as ``promptrail.integrations``)."""
