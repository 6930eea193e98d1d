"""Key lifecycle over HTTP, the same operations as ``tokenward keys``.

    GET  /admin/keys[?tenant=T]            list keys (never secrets or hashes)
    POST /admin/keys                       {tenant, name?, models?, environments?, expires_in?, reason?, reviewer?,
                                            daily_spend_usd?, monthly_spend_usd?, tokens_per_minute?}
                                           -> 201 {"key": <plaintext, shown once>, ...record}
    GET  /admin/keys/{id}                  one key; {id} is a key id or a whole key
    POST /admin/keys/{id}/revoke           {reason, reviewer?}
    POST /admin/keys/{id}/suspend          {for: "1h", reason, reviewer?}
    POST /admin/keys/{id}/reinstate        {reason, reviewer?}
    GET  /admin/audit[?key_id=ID]          the audit trail
    POST /admin/tenants/{T}/cache/purge    drop the tenant's cached answers -> {"tenant", "purged"}
    POST /admin/reload                     reload the config file (every worker) -> {"reloaded": ...}

Every route is one row of ``AdminApi.table`` (method, path pattern, handler, summary): the
key routes are added here, the others by the parts that own them when the gateway is
assembled (assemble/gateway.py: the cache's purge, the reload, and control/admin.py's
operator controls and status page). The table answers a request, and the gateway's
routing table (assemble/routes.py, ``tokenward routes``) lists it.

Every call needs ``Authorization: Bearer <admin token>`` (or HTTP Basic with the token as
the password, which a browser asks for); the token is read from the env var named by
``admin.token_env`` and compared in constant time.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any, Awaitable, Callable, Literal, NamedTuple, overload
from urllib.parse import parse_qs

import msgspec

from ..config.key_limits import KeyLimits, key_limits
from ..config.schema import Config
from ..errors import Reason, Refusal, envelope
from ..http.asgi import Receive, Scope, Send
from ..http.bodies import read_bounded
from ..http.responses import JSON, code_header, send_bytes
from ..keys import format as keyformat
from ..keys.model import KeyNotFound, KeyStateError, KeyStoreError, parse_duration
from ..keys.service import KeyService, check_new_key
from ..wire.codec import json_encode as _encode, json_decode as _decode

log = logging.getLogger("tokenward.admin")

MAX_BODY_BYTES = 65_536


class _Problem(Exception):
    def __init__(self, status: int, body: bytes, code: str) -> None:
        self.status = status
        self.body = body
        self.code = code   # the body's error code, named again in x-tokenward-reason


def _error(status: int, code: str, message: str, param: str | None = None) -> _Problem:
    body = _encode({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}})
    return _Problem(status, body, code)


# A route's answer: (status, body) or (status, body, extra headers)
Answer = tuple[Any, ...]
# A route's handler: (the path's parts after /admin/, the query, receive) -> its answer
# (None: not the handler's after all, answered route_denied)
Handler = Callable[[list[str], dict[str, str], Receive], Awaitable[Answer | None]]


class AdminRoute(NamedTuple):
    method: str
    pattern: tuple[str, ...]   # the path after /admin/, by part; "{name}" matches any one part
    handler: Handler
    summary: str

    @property
    def path(self) -> str:
        return "/admin/" + "/".join(self.pattern)

    def matches(self, method: str, parts: list[str]) -> bool:
        if method != self.method or len(parts) != len(self.pattern):
            return False
        return all(want == got or want.startswith("{") for want, got in zip(self.pattern, parts))

def _refusal(reason: Reason, message: str, param: str | None = None) -> _Problem:
    return _Problem(reason.status, envelope(reason, message, param), reason.name)


@overload
def _text(body: dict[str, Any], name: str, required: Literal[True]) -> str: ...
@overload
def _text(body: dict[str, Any], name: str, required: bool = False) -> str | None: ...
def _text(body: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _refusal(Reason.invalid_field, f"{name} must be a non-empty string", name)
    return value


def _names(body: dict[str, Any], name: str) -> list[str] | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _refusal(Reason.invalid_field, f"{name} must be a list of strings", name)
    return value


@overload
def _duration(body: dict[str, Any], name: str, required: Literal[True]) -> float: ...
@overload
def _duration(body: dict[str, Any], name: str, required: bool) -> float | None: ...
def _duration(body: dict[str, Any], name: str, required: bool) -> float | None:
    value = body.get(name)
    if value is None:
        if required:
            raise _refusal(Reason.invalid_field, f"{name} is required (e.g. \"1h\")", name)
        return None
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
        if isinstance(value, str):
            return parse_duration(value)
    except ValueError as exc:
        raise _refusal(Reason.invalid_field, str(exc), name) from None
    raise _refusal(Reason.invalid_field, f"{name} must be a duration like \"1h\" or seconds", name)


def _limits(body: dict[str, Any]) -> KeyLimits | None:
    """The key's own limits (``daily_spend_usd``, ``monthly_spend_usd``, ``tokens_per_minute``)."""
    try:
        return key_limits(body)
    except ValueError as exc:
        raise _refusal(Reason.invalid_field, str(exc), str(exc).split(" ", 1)[0]) from None


class AdminApi:
    def __init__(self, keys: KeyService, token: str, config: Config,
                 clock: Callable[[], float] = time.time) -> None:
        self.keys = keys
        self._token = token.encode()
        self._config = config
        self._clock = clock
        self.table: list[AdminRoute] = []
        self.add("GET", "keys", self._list, "list keys (never secrets or hashes)")
        self.add("POST", "keys", self._create, "create a key (its plaintext shown once)")
        self.add("GET", "keys/{id}", self._get, "one key")
        for change in _CHANGES:
            self.add("POST", f"keys/{{id}}/{change}", self._change, f"{change} a key")
        self.add("GET", "audit", self._audit, "the audit trail")

    def add(self, method: str, path: str, handler: Handler, summary: str) -> None:
        """A route under /admin/ (``path`` without it, parts like ``{tenant}`` match any one)."""
        pattern = tuple(path.split("/"))
        if any(route.method == method and route.pattern == pattern for route in self.table):
            raise ValueError(f"admin route {method} /admin/{path} added twice")
        self.table.append(AdminRoute(method, pattern, handler, summary))

    def action(self, name: str, run: Callable[[], Awaitable[Any]], summary: str) -> None:
        """``POST /admin/{name}`` runs ``run`` (the reload); a refusal is a 409 naming it."""
        async def handler(parts: list[str], query: dict[str, str], receive: Receive) -> Answer:
            try:
                return 200, _encode(await run())
            except Exception as exc:  # refused (a bad new config): the running one keeps serving
                raise _error(409, f"{name}_refused", str(exc)) from None
        self.add("POST", name, handler, summary)

    def tenant_action(self, name: str, run: Callable[[str], Awaitable[Any]], summary: str) -> None:
        """``POST /admin/tenants/{tenant}/{name}`` runs ``run(tenant)`` (the cache's purge)."""
        async def handler(parts: list[str], query: dict[str, str], receive: Receive) -> Answer:
            return 200, await self._tenant_action(parts[1], run)
        self.add("POST", f"tenants/{{tenant}}/{name}", handler, summary)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = b"admin_" + f"{time.monotonic_ns():x}".encode()
        headers = None
        try:
            self._authorize(scope)
            answer = await self._route(scope, receive)
            status, body = answer[0], answer[1]
            headers = answer[2] if len(answer) > 2 else None
        except _Problem as problem:
            status, body = problem.status, problem.body
            headers = [JSON, code_header(problem.code)]
            if status == 401:   # a browser (the status page) asks for the token as a password
                headers.append((b"www-authenticate", b'Basic realm="tokenward admin"'))
        except Exception:
            log.exception("admin request %s %s failed", scope["method"], scope["path"])
            status, body = 500, envelope(Reason.internal_error, "internal error")
            headers = [JSON, code_header(Reason.internal_error.name)]
        await send_bytes(send, status, [*(headers or (JSON,)), (b"x-request-id", request_id)], body)

    def _authorize(self, scope: Scope) -> None:
        presented = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    presented = token.strip()
                elif scheme.lower() == b"basic":   # a browser: any user name, the token as password
                    presented = _basic_password(token.strip())
                break
        if presented is None:
            raise _refusal(Reason.missing_credentials, "admin API needs Authorization: Bearer <admin token>")
        if not hmac.compare_digest(presented, self._token):
            raise _refusal(Reason.invalid_credentials, "invalid admin token")

    async def _route(self, scope: Scope, receive: Receive) -> Answer:
        method = scope["method"]
        parts = scope["path"].rstrip("/").split("/")[2:]  # "", "admin", ...
        query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}
        for route in self.table:
            if route.matches(method, parts):
                answer = await route.handler(parts, query, receive)
                if answer is not None:
                    return answer
                break
        if any(route.matches(route.method, parts) for route in self.table):
            allowed = ", ".join(sorted({r.method for r in self.table if r.matches(r.method, parts)}))
            raise _Problem(405, envelope(Reason.method_not_allowed, f"method {method} is not allowed on "
                                         f"{scope['path'][:200]} (allowed: {allowed})"), Reason.method_not_allowed.name)
        raise _refusal(Reason.route_denied, f"no admin route {method} {scope['path'][:200]}")

    async def _tenant_action(self, tenant: str, action: Callable[[str], Awaitable[Any]]) -> bytes:
        if tenant not in self._config.tenants:
            raise _error(404, "tenant_not_found", f"no tenant {tenant!r} in the config", "tenant")
        try:
            result = await action(tenant)
        except Exception as exc:  # a store that is down: say so, not a 500
            raise _error(503, "action_unavailable", f"the action could not be done now: {exc}") from None
        return _encode({"tenant": tenant, **result})

    async def _list(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer:
        now = self._clock()
        records = await self.keys.list(query.get("tenant"))
        return 200, _encode({"object": "list", "data": [r.public(now) for r in records]})

    async def _get(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer:
        key_id = _key_id(parts[1])
        record = await self.keys.get(key_id)
        if record is None:
            raise _error(404, "key_not_found", f"no key with id {key_id}", "id")
        return 200, _encode(record.public(self._clock()))

    async def _audit(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer:
        ident = query.get("key_id")
        key_id = _key_id(ident) if ident is not None else None
        records = await self.keys.audit(key_id)
        return 200, _encode({"object": "list", "data": [msgspec.structs.asdict(r) for r in records]})

    async def _create(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer:
        body = await _read_json(receive)
        tenant = _text(body, "tenant", required=True)
        models = _names(body, "models")
        environments = _names(body, "environments")
        expires_in = _duration(body, "expires_in", required=False)
        limits = _limits(body)
        try:
            check_new_key(self._config, tenant, models, limits)
        except KeyStoreError as exc:
            param = "tenant" if tenant not in self._config.tenants else "limits" if "limits" in str(exc) else "models"
            raise _refusal(Reason.invalid_field, str(exc), param)
        now = self._clock()
        plaintext, record = await self.keys.create(
            tenant, name=_text(body, "name"), models=models, environments=environments,
            expires_at=now + expires_in if expires_in is not None else None,
            reason=_text(body, "reason"), reviewer=_text(body, "reviewer") or "admin-api", limits=limits)
        return 201, _encode({"key": plaintext, **record.public(now)})

    async def _change(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer:
        action, key_id = parts[2], _key_id(parts[1])
        body = await _read_json(receive)
        reason = _text(body, "reason", required=True)
        reviewer = _text(body, "reviewer") or "admin-api"
        try:
            if action == "suspend":
                record = await self.keys.suspend(key_id, duration_s=_duration(body, "for", required=True),
                                                 reason=reason, reviewer=reviewer)
            else:
                record = await _CHANGES[action](self.keys, key_id, reason=reason, reviewer=reviewer)
        except KeyNotFound:
            raise _error(404, "key_not_found", f"no key with id {key_id}", "id") from None
        except KeyStateError as exc:
            raise _error(409, "key_state_conflict", str(exc), "id") from None
        return 200, _encode(record.public(self._clock()))


_CHANGES: dict[str, Callable[..., Awaitable[Any]]] = {
    "revoke": KeyService.revoke,
    "suspend": KeyService.suspend,
    "reinstate": KeyService.reinstate,
}


def _basic_password(encoded: bytes) -> bytes:
    import base64
    import binascii

    try:
        return base64.b64decode(encoded, validate=True).partition(b":")[2]
    except (binascii.Error, ValueError):
        return b""


def _key_id(ident: str) -> str:
    key_id = keyformat.key_id_of(ident)
    if key_id is None:
        raise _refusal(Reason.invalid_field, "not a key id or a key", "id")
    return key_id


async def _read_json(receive: Receive) -> dict[str, Any]:
    raw = await read_bounded(receive, MAX_BODY_BYTES, "an admin request body")
    if isinstance(raw, Refusal):
        raise _refusal(raw.reason, raw.message)
    try:
        body = _decode(raw) if raw else {}
    except msgspec.DecodeError:
        raise _refusal(Reason.invalid_json, "admin request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _refusal(Reason.invalid_json, "admin request body must be a JSON object")
    return body
