"""Provider connections: a project's own provider credentials, sealed at rest, picked by the
credential order of runs and experiments, and held to a monthly budget
(docs/api-notes.md, "Connections"; docs/security.md, "Connections")."""
