"""Single sign-on with OpenID Connect (docs/security.md, "SSO")."""

from __future__ import annotations

from .service import LoginStart, SsoConfig, SsoService

__all__ = ["LoginStart", "SsoConfig", "SsoService"]
