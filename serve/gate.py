"""What a request must pass on its headers alone, before its body is read: Host, Origin, the API key,
and the body size the addressed model can take.

serve/server.py calls `Gate.admit` as soon as a request's headers are in, so an unauthenticated or
oversized upload is answered (and the connection closed) without reading a byte of its body; the app
calls it again in `before_request` for any other WSGI server (tests run Werkzeug's). Only in-memory
look-ups happen here: it runs on the event loop.

- Host (DNS rebinding): a page on attacker.example whose name is rebound to 127.0.0.1 reaches a
  loopback scorer with `Host: attacker.example`. Accepted: IP literals, `localhost`, the name given to
  `--host`, and `--allowed-hosts` (exact names, `.example.com` for a domain and its subdomains, `*`).
- Origin (any page could make a visitor's browser POST to the scorer): a request carrying an Origin
  is served only from the scorer's own page (the Origin names the Host it was sent to) or an origin in
  `--allowed-origins` (which also get CORS headers). Clients that are not browsers send no Origin: a
  curl POST with no or any Content-Type is still served, as TF Serving does.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from .errors import ScoringError, capped

OPEN_PATHS = ("/v2/health/", "/openapi.json", "/static/")  # served without an API key
KEY_REFUSED = "missing or invalid API key: send Authorization: Bearer <key>"
DEFAULT_BODY_LIMIT = 1 << 20  # bytes a request to any other route may send
OPEN_BODY_LIMIT = 64 << 10  # bytes a request to an open path (or a preflight) may send
INFER_ROUTES = (
    re.compile(r"/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?/infer"),
    re.compile(r"/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+))?:predict"),
)
CONTROL_ROUTE = re.compile(r"/v2/repository/models/[^/]+/(?:load|unload)")
CONTROL_OFF = "model control is off: start the server with --model-control explicit and --admin-key-env"
ADMIN_KEY_REFUSED = "loading and unloading models need the admin key: send Authorization: Bearer <admin key>"
PREFLIGHT_HEADERS = "Authorization, Content-Type, X-API-Key, Inference-Header-Content-Length"


class Headers(Protocol):
    def get(self, name: str, /) -> str | None: ...


@dataclass
class Refusal:
    """An answer given instead of serving the request: status, one-line message, extra headers."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)


def read_api_keys(path: str | None) -> frozenset[str]:
    """The keys, one per line; ValueError (one line) for a file that is unreadable, empty or not ASCII."""
    if not path:
        return frozenset()
    try:
        text = Path(path).read_bytes().decode("ascii")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"API key file {path}: {error}") from None
    keys = frozenset(line.strip() for line in text.splitlines() if line.strip())
    if not keys:
        raise ValueError(f"API key file {path} holds no API key")
    if any(not key.isprintable() or " " in key for key in keys):
        raise ValueError(f"API key file {path}: a key holds spaces or control characters")
    return keys


def key_accepted(authorization: str, api_key: str, keys: frozenset[str]) -> bool:
    """An `Authorization: Bearer <key>` or `X-API-Key: <key>` holds one of the keys (HTTP headers and gRPC
    metadata alike). The scheme's name is read in any letter case, as HTTP's are (RFC 9110 §11.1)."""
    scheme, _, token = authorization.partition(" ")
    given = token.strip(" ") if scheme.lower() == "bearer" else api_key
    # bytes, not str: compare_digest refuses non-ASCII strings, and a header may hold anything
    offered = given.encode("utf-8", "surrogateescape")
    return any(hmac.compare_digest(offered, key.encode()) for key in keys)


def control_refusal(
    admin_keys: frozenset[str], authorization: str | None, api_key: str | None
) -> Refusal | None:
    """Why a load or unload is refused (model control off, or no admin key), or None: it may go on. The
    scoring keys are not admin keys."""
    if not admin_keys:
        return Refusal(403, CONTROL_OFF)
    if not key_accepted(authorization or "", api_key or "", admin_keys):
        return Refusal(401, ADMIN_KEY_REFUSED, {"WWW-Authenticate": "Bearer"})
    return None


def read_admin_key(model_control: str, variable: str | None) -> frozenset[str]:
    """The admin key (from the environment variable named `variable`) when model control is explicit;
    ValueError in one line, naming the variable, never its value."""
    if model_control != "explicit":
        return frozenset()
    if not variable:
        raise ValueError(
            "--model-control explicit needs an admin key: name its variable with --admin-key-env"
        )
    key = os.environ.get(variable, "").strip()
    if not key:
        raise ValueError(f"--admin-key-env {variable}: the variable is not set, or empty")
    if not key.isascii() or not key.isprintable() or " " in key:
        raise ValueError(f"--admin-key-env {variable}: the key holds spaces, control or non-ASCII characters")
    return frozenset({key})


def merged(path: str) -> str:
    """`path` with each run of slashes made one, as the routes take it: Werkzeug strips the leading ones
    (`//v2/models/m/infer` is inference) and redirects a path with other runs to the merged one. Every
    check reads that path, so no spelling of a route gets another route's key or body limit."""
    return SLASHES.sub("/", path) if "//" in path else path


SLASHES = re.compile("/{2,}")


def routed_path(path_info: str) -> str:
    """The path as the app routes it, from WSGI's PATH_INFO (the percent-decoded bytes of the path, read
    as Latin-1, slashes merged: serve.server.path_info): those bytes read as UTF-8, as Werkzeug reads
    them. A model named in UTF-8 (tritonclient and browsers percent-encode names so) is the model `nnsql
    models list` shows, for the gate as for the routes."""
    if path_info.isascii():
        return path_info
    return path_info.encode("latin-1", "replace").decode("utf-8", "replace")


def host_name(host: str) -> str:
    """The name or address of a Host header, without its port and IPv6 brackets, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def name_allowed(name: str, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        if pattern == "*" or name == pattern or (pattern.startswith(".") and f".{name}".endswith(pattern)):
            return True
    return False


class Gate:
    def __init__(
        self,
        api_keys: frozenset[str],
        limit_for_model: Callable[[str, str | None], tuple[int, str]],
        *,
        listen_host: str = "127.0.0.1",
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        admin_keys: frozenset[str] = frozenset(),
    ) -> None:
        """`limit_for_model(name, version)`: the body size that model takes and what it is, in words;
        ScoringError (404) for an unknown model or version. `admin_keys`: what loading and unloading
        models need (none: model control is off)."""
        self.api_keys = api_keys
        self.admin_keys = admin_keys
        self.limit_for_model = limit_for_model
        self.hosts = {"localhost", host_name(listen_host), *(h.strip().lower() for h in allowed_hosts)}
        self.host_verdicts: dict[str, bool] = {}  # Host header -> allowed, for the hosts seen
        self.origins = {o.strip().rstrip("/").lower() for o in allowed_origins if o.strip()}

    def admit(self, method: str, path: str, query: str, headers: Headers) -> Refusal | int:
        """The body limit in bytes for this request, or the Refusal to send instead. `headers`: names in
        lower case; `path`: percent-decoded, its slashes merged (`merged`) as the routes take it."""
        host = headers.get("host")
        if not host:
            return Refusal(400, "the request has no Host header")
        if not self.host_allowed(host):
            return Refusal(
                403,
                f"Host {capped(host, 80)!r} is not an address of this server: add it with --allowed-hosts",
            )
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, host):
            return Refusal(
                403, f"Origin {capped(origin, 80)!r} may not use this server: add it with --allowed-origins"
            )
        if method == "OPTIONS" or path == "/" or path.startswith(OPEN_PATHS):
            # served without a key (a CORS preflight carries no credentials), and never with a body: a
            # large declared body would hold the worker's body budget (503 for everyone) before any key
            limit, what = OPEN_BODY_LIMIT, "a request that needs no API key"
        elif CONTROL_ROUTE.fullmatch(path):
            refusal = control_refusal(self.admin_keys, headers.get("authorization"), headers.get("x-api-key"))
            if refusal is not None:
                return refusal
            limit, what = OPEN_BODY_LIMIT, "a repository request"
        elif not self.authorised(path, headers):
            return Refusal(401, KEY_REFUSED, {"WWW-Authenticate": "Bearer"})
        else:
            try:
                limit, what = self.body_limit(method, path, query)
            except ScoringError as error:
                return Refusal(error.status, error.message)
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            return Refusal(413, f"request body exceeds the limit of {limit} bytes for {what}")
        return limit

    def host_allowed(self, host: str) -> bool:
        verdict = self.host_verdicts.get(host)
        if verdict is None:
            name = host_name(host)
            verdict = is_ip_literal(name) or name_allowed(name, self.hosts)
            if len(self.host_verdicts) < 1024:  # remembered for the first hosts only: no growth by attack
                self.host_verdicts[host] = verdict
        return verdict

    def origin_allowed(self, origin: str, host: str) -> bool:
        """The scorer's own page (the Origin names the Host the request went to), or --allowed-origins."""
        normalised = origin.strip().rstrip("/").lower()
        if "*" in self.origins or normalised in self.origins:
            return True
        parts = urlsplit(normalised)
        return parts.scheme in ("http", "https") and parts.netloc == host.strip().lower()

    def cors_headers(self, origin: str | None) -> dict[str, str]:
        """Headers that let a browser page of an allowed foreign origin read the answer."""
        if not origin or not self.origins:
            return {}
        normalised = origin.strip().rstrip("/").lower()
        if "*" not in self.origins and normalised not in self.origins:
            return {}
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
            "Access-Control-Allow-Headers": PREFLIGHT_HEADERS,
            "Access-Control-Max-Age": "600",
            "Vary": "Origin",
        }

    def authorised(self, path: str, headers: Headers) -> bool:
        if not self.api_keys or path == "/" or path.startswith(OPEN_PATHS):
            return True
        return key_accepted(headers.get("authorization") or "", headers.get("x-api-key") or "", self.api_keys)

    def body_limit(self, method: str, path: str, query: str) -> tuple[int, str]:
        """The largest body this request may send, and what sets it, in words."""
        if method not in ("POST", "PUT"):
            return DEFAULT_BODY_LIMIT, path
        for route in INFER_ROUTES:
            match = route.fullmatch(path)
            if match:
                return self.limit_for_model(match["name"], match["version"])
        if path == "/score":
            try:
                arguments = parse_qs(query, max_num_fields=8)
            except ValueError:  # more fields than that
                raise ScoringError("/score takes the query parameters model and version", 400) from None
            name = arguments.get("model", [None])[0]
            return self.limit_for_model(name or "", arguments.get("version", [None])[0])
        return DEFAULT_BODY_LIMIT, path
