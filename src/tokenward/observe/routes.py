"""What a request's path may become in a metric label or a decision record: its route
template, never the path itself.

A path is the one request value a client can vary freely before it has shown any
credentials, so a label or a record key taken from it grows the process (and every scrape)
without bound and carries whatever the client wrote there, an address or a name included.
Labels therefore name the matched route: a configured route's own path
(``/v1/chat/completions``), the agent-job routes' templates (``/v1/jobs``,
``/v1/jobs/{id}``), and ``other`` for a path that matches no route. The set of labels is
fixed by the configuration, whatever the traffic.

A decision record keeps the template, and for ``other`` the path's *shape* only
(``path_shape``): letters become ``a``, digits ``9``, a short set of punctuation stays, and
anything else becomes ``?``, cut to 48 characters. ``/v1/path.victim@secretmail.org/x`` is
recorded as ``/a9/a.a@a.a/a``: an operator sees that something probes email-like paths, and
no value of the path survives.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

OTHER = "other"
JOBS = "/v1/jobs"
JOB = "/v1/jobs/{id}"
SHAPE_CHARS = 48

# the gateway's own route templates; a gateway adds its configured routes (RouteLabels)
OWN = ("/healthz", "/readyz", "/metrics", "/openapi.json", JOBS, JOB)

_LETTERS = re.compile(r"[A-Za-z]+")
_DIGITS = re.compile(r"[0-9]+")
_ELSE = re.compile(r"[^-a9/._~@%+=]")


class RouteLabels:
    """The route templates one gateway's labels may take besides ``other``: its own routes
    and its configured ones (a bounded set, the configuration's; a reload adds its routes)."""

    __slots__ = ("known",)

    def __init__(self, paths: Iterable[str] = ()) -> None:
        self.known = set(OWN)
        self.known.update(paths)

    def add(self, paths: Iterable[str]) -> None:
        self.known.update(paths)

    def template(self, path: str) -> str:
        """The route template a path matches, or ``other``."""
        if path in self.known:
            return path
        if path.startswith(JOBS):
            rest = path[len(JOBS):].rstrip("/")
            if not rest:
                return JOBS
            if rest[0] == "/" and "/" not in rest[1:]:
                return JOB
        return OTHER

    def label(self, ctx: Any) -> str:
        """A request's route label: the route the edge matched, else the path's template."""
        route = ctx.route
        return route.path if route is not None else self.template(ctx.path)


def path_shape(path: str) -> str:
    """The shape of a path that matched no route, with no value left in it (module docstring)."""
    shape = _DIGITS.sub("9", _LETTERS.sub("a", path[:SHAPE_CHARS * 4]))
    return _ELSE.sub("?", shape)[:SHAPE_CHARS]
