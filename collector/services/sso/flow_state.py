"""What a sign-in started at ``/v1/auth/oidc/login`` must find again at the callback: the
``state``, the ``nonce`` and the PKCE ``code_verifier`` (docs/security.md, "SSO").

They travel in a short-lived cookie signed by the collector (an HS256 JWS), so any collector of
a deployment can finish a sign-in another one started and nothing is stored per attempt. The
signing key is derived from the client secret, which only the collectors and the provider
hold. The cookie is HttpOnly, limited to ``/v1/auth/oidc`` and lives :data:`FLOW_SECONDS`; the
callback clears it. The browser can read nothing of it that helps an attacker: the
``code_verifier`` only proves the code's exchange comes from the one that asked for it.

Each state is accepted once per collector: a used one is remembered until its cookie has
expired, so a replayed callback is refused before the code is exchanged.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import OctKey

FLOW_COOKIE = "promptrail_oidc"
FLOW_COOKIE_PATH = "/v1/auth/oidc"
FLOW_SECONDS = 600
# States remembered at most (each for FLOW_SECONDS); past it the oldest are forgotten.
MAX_USED_STATES = 100_000


class FlowRefused(Exception):
    """The callback's state does not match a sign-in this collector started (or was used)."""


@dataclass(frozen=True)
class Flow:
    """One sign-in in progress."""

    state: str
    nonce: str
    code_verifier: str


class FlowSigner:
    """Seal a :class:`Flow` into the cookie's value and open it again at the callback."""

    def __init__(self, client_secret: str, clock: Callable[[], float] = time.time) -> None:
        derived = hmac.new(
            client_secret.encode(), b"promptrail oidc flow cookie v1", hashlib.sha256
        ).digest()
        self._key = OctKey.import_key(derived)
        self._clock = clock
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()

    def seal(self, flow: Flow) -> str:
        """The cookie's value for ``flow``, valid :data:`FLOW_SECONDS`."""
        claims = {
            "state": flow.state,
            "nonce": flow.nonce,
            "cv": flow.code_verifier,
            "exp": int(self._clock()) + FLOW_SECONDS,
        }
        return jwt.encode({"alg": "HS256"}, claims, self._key)

    def open(self, cookie: str | None, state: str | None) -> Flow:
        """Return the flow of ``cookie`` if ``state`` is its state, unused and not expired."""
        if not cookie or not state:
            raise FlowRefused("no sign-in in progress in this browser (or its cookie expired)")
        try:
            claims = jwt.decode(cookie, self._key, algorithms=["HS256"]).claims
        except (JoseError, ValueError):
            raise FlowRefused("the sign-in cookie is not one this collector signed") from None
        expires = claims.get("exp")
        if not isinstance(expires, int) or expires <= self._clock():
            raise FlowRefused("the sign-in took too long; start again")
        sealed_state = str(claims.get("state", ""))
        if not hmac.compare_digest(sealed_state.encode(), state.encode()):
            raise FlowRefused("the state does not match the sign-in this browser started")
        self._use(sealed_state, float(expires))
        return Flow(sealed_state, str(claims.get("nonce", "")), str(claims.get("cv", "")))

    def _use(self, state: str, expires: float) -> None:
        now = self._clock()
        with self._lock:
            if state in self._used:
                raise FlowRefused("this sign-in's state was already used")
            if len(self._used) >= MAX_USED_STATES:
                for old in [s for s, until in self._used.items() if until <= now]:
                    del self._used[old]
                while len(self._used) >= MAX_USED_STATES:
                    del self._used[next(iter(self._used))]
            self._used[state] = expires
