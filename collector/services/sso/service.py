"""Sign-in through an OpenID Connect provider (docs/security.md, "SSO"; docs/api-notes.md,
"Accounts").

:meth:`SsoService.start` sends the browser to the provider with an authorization-code request
(PKCE S256, ``state``, ``nonce``) and seals what the callback needs into a signed cookie
(``flow_state.py``). :meth:`SsoService.finish` checks the callback's state against that cookie,
exchanges the code with the client secret and the PKCE verifier (Authlib's OAuth 2 client),
checks the ID token (``provider.py``), matches or makes the user by its e-mail address, maps
its groups to project roles (``roles.py``) and starts the same server-side session as a
password sign-in. Every refusal is 403 FORBIDDEN with ``details.reason`` and starts nothing.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from authlib.common.security import generate_token  # type: ignore[import-untyped]
from authlib.integrations.base_client import OAuthError  # type: ignore[import-untyped]
from authlib.integrations.httpx_client import OAuth2Client  # type: ignore[import-untyped]

from ...config import Settings
from ...errors import Forbidden, NotFound, UserAlreadyExists, ValidationFailed
from ...store.accounts import AccountStore, SessionRow, UserRow
from ...store.writes import WriteOutcome
from ..accounts import Accounts, NewSession
from ..accounts.sessions import SESSION_SECONDS, hash_token
from ..refused_writes import raise_if_refused
from .flow_state import Flow, FlowRefused, FlowSigner
from .provider import HTTP_TIMEOUT_SECONDS, Provider, ProviderError, TokenRejected
from .roles import apply_roles, mapped_roles

logger = logging.getLogger("promptrail.sso")

CALLBACK_PATH = "/v1/auth/oidc/callback"


@dataclass(frozen=True)
class SsoConfig:
    """The SSO settings of one collector."""

    issuer: str
    client_id: str
    client_secret: str
    role_claim: str
    role_map: Mapping[str, str]
    allowed_domains: frozenset[str]
    scopes: str
    public_url: str | None

    @classmethod
    def from_settings(cls, settings: Settings) -> SsoConfig | None:
        """The settings' SSO, or None when the issuer, client id or secret is not set."""
        secret = settings.oidc_client_secret
        if not (settings.oidc_issuer and settings.oidc_client_id and secret):
            return None
        domains = {d.strip().lower().lstrip("@") for d in settings.oidc_allowed_domains.split(",")}
        return cls(
            issuer=settings.oidc_issuer,
            client_id=settings.oidc_client_id,
            client_secret=secret.get_secret_value(),
            role_claim=settings.oidc_role_claim,
            role_map=dict(settings.oidc_role_map),
            allowed_domains=frozenset(d for d in domains if d),
            scopes=settings.oidc_scopes,
            public_url=settings.public_url.rstrip("/") if settings.public_url else None,
        )


@dataclass(frozen=True)
class LoginStart:
    """Where to send the browser, and the flow cookie's value to set on the way."""

    url: str
    cookie: str


def refused(reason: str, message: str) -> Forbidden:
    """The 403 of a sign-in that starts no session."""
    return Forbidden(f"SSO sign-in refused: {message}", {"reason": reason})


class SsoService:
    """Start and finish OpenID Connect sign-ins."""

    def __init__(
        self,
        config: SsoConfig | None,
        accounts: Accounts,
        store: AccountStore,
        retry_after_seconds: int = 2,
    ) -> None:
        self.config = config
        self._accounts = accounts
        self._store = store
        self._retry_after = retry_after_seconds
        self.provider = Provider(config.issuer, config.client_id) if config else None
        self._signer = FlowSigner(config.client_secret) if config else None

    @property
    def enabled(self) -> bool:
        """Whether SSO is configured."""
        return self.config is not None

    def redirect_uri(self, request_base: str) -> str:
        """The callback's address as the provider must send the browser back to it."""
        base = (self.config.public_url if self.config else None) or request_base.rstrip("/")
        return base + CALLBACK_PATH

    def start(self, request_base: str) -> LoginStart:
        """Begin a sign-in: the provider's authorization URL and the flow cookie."""
        _, provider, signer = self._parts()
        try:
            endpoint = provider.discovery().authorization_endpoint
        except ProviderError as exc:
            logger.warning("SSO login: %s", exc)
            raise refused("provider", "the identity provider cannot be reached") from None
        flow = Flow(
            state=generate_token(32), nonce=generate_token(32), code_verifier=generate_token(64)
        )
        with self._client(request_base) as client:
            url, _ = client.create_authorization_url(
                endpoint, state=flow.state, code_verifier=flow.code_verifier, nonce=flow.nonce
            )
        return LoginStart(str(url), signer.seal(flow))

    def finish(self, request_base: str, query: Mapping[str, str], cookie: str | None) -> NewSession:
        """Finish a sign-in from the provider's callback; start the user's session."""
        config, provider, signer = self._parts()
        try:
            flow = signer.open(cookie, query.get("state"))
        except FlowRefused as exc:
            raise refused("state", str(exc)) from None
        if "error" in query:
            raise refused("provider", f"the identity provider answered {query['error']!r}")
        claims = self._claims(request_base, provider, flow, query.get("code", ""))
        email = self._email(config, claims)
        user = self._user(email, claims)
        groups = _groups(claims.get(config.role_claim))
        changes = apply_roles(
            self._store,
            user.id,
            mapped_roles(groups, config.role_map),
            self._accounts.projects.exists,
            self._stored,
        )
        if changes.set or changes.removed:
            logger.info("SSO roles of %s: set %s, removed %s", email, changes.set, changes.removed)
            self._accounts.sessions.roles_changed(user.id)
        return self._session(user)

    def _claims(
        self, request_base: str, provider: Provider, flow: Flow, code: str
    ) -> dict[str, Any]:
        if not code:
            raise refused("token", "the callback carries no authorization code")
        try:
            with self._client(request_base) as client:
                token = client.fetch_token(
                    provider.discovery().token_endpoint,
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=flow.code_verifier,
                )
        except (OAuthError, httpx.HTTPError, ProviderError, ValueError) as exc:
            logger.warning("SSO code exchange failed: %s", exc)
            raise refused("token", "the identity provider did not exchange the code") from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise refused("token", "the identity provider's answer has no ID token")
        try:
            claims = provider.check_id_token(id_token, flow.nonce)
        except (TokenRejected, ProviderError) as exc:
            logger.warning("SSO: %s", exc)
            raise refused("token", str(exc)) from None
        if "email" in claims and self._role_claim() in claims:
            return claims
        # Some providers put the profile in the userinfo answer only.
        try:
            info = provider.userinfo(str(token.get("access_token", "")))
        except ProviderError as exc:
            logger.warning("SSO userinfo: %s", exc)
            return claims
        if info.get("sub") != claims["sub"]:
            raise refused("token", "the userinfo answer is about another subject")
        return {**info, **claims}

    def _email(self, config: SsoConfig, claims: Mapping[str, Any]) -> str:
        email = claims.get("email")
        if not isinstance(email, str) or "@" not in email:
            raise refused("email", "the identity provider sent no e-mail address")
        # Absent means the provider vouches for its addresses; false means it does not.
        if claims.get("email_verified") in (False, "false"):
            raise refused("email", f"the identity provider has not verified {email}")
        domain = email.rsplit("@", 1)[1].lower()
        if config.allowed_domains and domain not in config.allowed_domains:
            raise refused("domain", f"e-mail domain {domain} is not allowed here")
        return email

    def _user(self, email: str, claims: Mapping[str, Any]) -> UserRow:
        user = self._accounts.users.find(email)
        if user is None:
            name = claims.get("name") if isinstance(claims.get("name"), str) else None
            try:
                user = self._accounts.users.create(email, name=name)
                logger.info("SSO made user %s on its first sign-in", email)
            except UserAlreadyExists:
                user = self._accounts.users.get(email)
            except ValidationFailed as exc:
                raise refused("email", exc.message) from None
        if user.disabled:
            raise refused("disabled", f"user {email} is disabled")
        return user

    def _session(self, user: UserRow) -> NewSession:
        now = datetime.now(UTC)
        self._stored(self._store.record_login(user.id, now))
        token = secrets.token_urlsafe(32)
        row = SessionRow(
            token_hash=hash_token(token),
            user_id=user.id,
            csrf_token=secrets.token_urlsafe(32),
            created_at=now,
            expires_at=now + timedelta(seconds=SESSION_SECONDS),
            revoked=False,
        )
        self._stored(self._store.put_session(row))
        signed_in = self._accounts.sessions.resolve(token)
        if signed_in is None:  # pragma: no cover - the row was just stored
            raise refused("session", "the session could not be started")
        return NewSession(token, signed_in, replace(user, last_login_at=now), SESSION_SECONDS)

    def _client(self, request_base: str) -> Any:
        config, _, _ = self._parts()
        return OAuth2Client(
            client_id=config.client_id,
            client_secret=config.client_secret,
            scope=config.scopes,
            redirect_uri=self.redirect_uri(request_base),
            code_challenge_method="S256",
            timeout=HTTP_TIMEOUT_SECONDS,
        )

    def _role_claim(self) -> str:
        return self.config.role_claim if self.config else "groups"

    def _parts(self) -> tuple[SsoConfig, Provider, FlowSigner]:
        if self.config is None or self.provider is None or self._signer is None:
            raise NotFound(
                "SSO is not configured: set PROMPTRAIL_OIDC_ISSUER, PROMPTRAIL_OIDC_CLIENT_ID "
                "and PROMPTRAIL_OIDC_CLIENT_SECRET (docs/deploy.md)"
            )
        return self.config, self.provider, self._signer

    def _stored(self, outcome: WriteOutcome) -> None:
        raise_if_refused(outcome, self._retry_after, "sso")


def _groups(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, str | int)]
    return []
