"""HTTP only: parse, call a service, shape the answer."""
