"""A real OpenID Connect provider for the SSO tests: django-oidc-provider in a Django project of
its own, run in a child process (``python -m tests.collector.accounts.oidc_provider DIR``).

A process of its own because Django's settings are global to a process and other tests
configure Django differently. It keeps its sqlite database in DIR, signs ID tokens with an RSA
key made by ``creatersakey``, and registers two confidential clients whose consent is skipped:
:data:`CLIENT_ID` (RS256) and :data:`HS256_CLIENT_ID` (ID tokens signed with the client secret,
which the collector must refuse). A user signs in on Django's own login form; its ``email`` and
``email_verified`` come from the userinfo hook, its ``groups`` (Django groups) from the
``groups`` scope of ``OIDC_EXTRA_SCOPE_CLAIMS``. With ``--claims-in-userinfo-only`` the ID token
carries no claims beyond the required ones, as some providers do.

``POST /testing/users`` (this harness only) makes or changes a user:
``{"username", "password", "email", "groups": [...], "email_verified": true|false|null}``;
``POST /testing/rotate-key`` replaces its signing key by a new one (a key rotation).
It prints its base URL on one line once it serves.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

CLIENT_ID = "promptrail-console"
CLIENT_SECRET = "s3cret-of-the-promptrail-client"
HS256_CLIENT_ID = "promptrail-hs256"
REDIRECT_URIS = (
    "http://testserver/v1/auth/oidc/callback",
    "https://promptrail.example/v1/auth/oidc/callback",
)
ISSUER_PATH = "/openid"

LOGIN_TEMPLATE = (
    '<form method="post">{% csrf_token %}{{ form }}'
    '<input type="hidden" name="next" value="{{ next }}"><button>Sign in</button></form>'
)

# Usernames whose address the provider says it has not verified (null: say nothing).
_email_verified: dict[str, bool | None] = {}


def userinfo(claims: dict[str, Any], user: Any) -> dict[str, Any]:
    """OIDC_USERINFO: the user's name, address and whether the address is verified."""
    claims["name"] = user.first_name
    claims["email"] = user.email
    verified = _email_verified.get(user.username, True)
    claims["email_verified"] = "" if verified is None else verified
    return claims


def _group_claims() -> type:
    from oidc_provider.lib.claims import ScopeClaims

    class GroupClaims(ScopeClaims):  # type: ignore[misc]
        """The ``groups`` scope: the names of the user's Django groups."""

        info_groups = ("Groups", "The groups you belong to.")

        def scope_groups(self) -> dict[str, Any]:
            return {"groups": [g.name for g in self.user.groups.order_by("name")]}

    return GroupClaims


def group_claims(token: Any) -> Any:
    """OIDC_EXTRA_SCOPE_CLAIMS (a class the provider instantiates with the token)."""
    return _group_claims()(token)


def configure(directory: Path, claims_in_id_token: bool) -> None:
    """Configure Django for the provider, its database in ``directory``."""
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        SECRET_KEY="promptrail-oidc-provider-tests",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "oidc_provider",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
        ],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(directory / "provider.sqlite3"),
            }
        },
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "OPTIONS": {
                    "loaders": [
                        (
                            "django.template.loaders.locmem.Loader",
                            {"registration/login.html": LOGIN_TEMPLATE},
                        ),
                        "django.template.loaders.app_directories.Loader",
                    ],
                    "context_processors": ["django.template.context_processors.request"],
                },
            }
        ],
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        LOGIN_URL="/accounts/login/",
        USE_TZ=True,
        OIDC_USERINFO=f"{__name__}.userinfo",
        OIDC_EXTRA_SCOPE_CLAIMS=f"{__name__}.group_claims",
        OIDC_IDTOKEN_INCLUDE_CLAIMS=claims_in_id_token,
        LOGGING_CONFIG=None,
    )
    django.setup()


def _set_user(request: Any) -> Any:
    from django.contrib.auth.models import Group, User
    from django.http import JsonResponse

    body = json.loads(request.body)
    user, _ = User.objects.get_or_create(username=body["username"])
    user.email = body["email"]
    user.first_name = body.get("name", "")
    user.set_password(body["password"])
    user.save()
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in body["groups"]])
    _email_verified[user.username] = body.get("email_verified", True)
    return JsonResponse({"id": user.id})


def _rotate_key(request: Any) -> Any:
    from django.core.management import call_command
    from django.http import JsonResponse
    from oidc_provider.models import RSAKey

    old = list(RSAKey.objects.values_list("id", flat=True))
    call_command("creatersakey", stdout=io.StringIO())
    RSAKey.objects.filter(id__in=old).delete()
    return JsonResponse({"kid": RSAKey.objects.get().kid})


def _urls() -> list[Any]:
    from django.contrib.auth.views import LoginView
    from django.urls import include, path
    from django.views.decorators.csrf import csrf_exempt

    return [
        path("accounts/login/", LoginView.as_view()),
        path("openid/", include("oidc_provider.urls", namespace="oidc_provider")),
        path("testing/users", csrf_exempt(_set_user)),
        path("testing/rotate-key", csrf_exempt(_rotate_key)),
    ]


urlpatterns: list[Any] = []


def _setup_store() -> None:
    from django.core.management import call_command
    from oidc_provider.models import Client, ResponseType

    call_command("migrate", verbosity=0, interactive=False)
    call_command("creatersakey", stdout=io.StringIO())
    code = ResponseType.objects.get(value="code")
    for client_id, algorithm in ((CLIENT_ID, "RS256"), (HS256_CLIENT_ID, "HS256")):
        client = Client.objects.create(
            name=client_id,
            client_type="confidential",
            client_id=client_id,
            client_secret=CLIENT_SECRET,
            jwt_alg=algorithm,
            require_consent=False,
            _redirect_uris="\n".join(REDIRECT_URIS),
        )
        client.response_types.add(code)


def main(argv: list[str]) -> None:
    """Set the provider up in ``argv[0]`` and serve it until killed."""
    from werkzeug.serving import make_server

    configure(Path(argv[0]), claims_in_id_token="--claims-in-userinfo-only" not in argv)
    urlpatterns.extend(_urls())
    _setup_store()
    from django.core.handlers.wsgi import WSGIHandler

    server = make_server("127.0.0.1", 0, WSGIHandler(), threaded=True)
    print(f"http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
