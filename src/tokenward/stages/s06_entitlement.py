"""Entitlement: which fields this caller may set, per the tenant's plan and the key's scope.

Runs before validation, so it reads the body through its lenient peek
(wire/request_body.py: decoded once per version of the body, shared with identity and the
control stage). A body that does not fit even that peek is admitted here: the strict schema
in validation refuses it with the precise error. Decisions:

- model in the plan (``model_not_entitled``) and in the key's scope (``key_scope_denied``);
  a model the gateway does not serve at all is left to validation (``unknown_model``);
- tools by function name against ``plan.allow_tools``, glob patterns (config/globs.py:
  ``"*"`` any client-run tool, ``"mcp__*"`` a family; a function inside a Responses
  ``namespace`` tool is named ``NAMESPACE.TOOL``) (``tools_not_entitled``);
- the system prompt: allowed; refused on a plan that forbids it (``system_prompt_not_allowed``);
  or, on a consumer plan with a server-side prompt, replaced by that prompt (the body is
  rewritten once here);
- optional features, denied unless ``plan.features`` lists them (``feature_not_entitled``):
  ``best_of`` (also allowed by ``allow_best_of``), ``structured_output`` (a json_schema
  response format), ``logprobs``, and vLLM's extra request fields, each enabled by its own
  name or all by ``vllm_extensions`` (validation then bounds their values); ``cache_salt``
  also by ``allow_cache_salt`` (upstream/salt.py folds it into the gateway's salt).

File types (``files_not_entitled``) are decided by validation, which sniffs them, from
``Entitlement.plan.allow_files``.
"""

from __future__ import annotations

from typing import Callable, Sequence, TYPE_CHECKING

import msgspec

from ..config.globs import GlobSet, glob_set
from ..config.loader import effective_plan
from ..config.schema import Config, PlanConfig
from ..errors import Reason, Refusal
from ..pipeline.results import Entitlement
from ..pipeline.stage import BaseStage
from ..validation.plan import feature_hint
from ..wire.request_body import FIRST_VLLM_FIELD, VLLM_FIELDS, PeekFields, PeekMessage

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext

SYSTEM_ROLES = frozenset({"system", "developer"})
_NO_VLLM = (None,) * len(VLLM_FIELDS)
_astuple = msgspec.structs.astuple


class TenantRules:
    """One tenant's plan, turned once into the sets each request is checked against."""

    __slots__ = ("plan", "models", "tools", "features", "system_prompt", "refuse_system", "entitlements")

    def __init__(self, plan: PlanConfig) -> None:
        self.plan = plan
        self.models = frozenset(plan.models)
        self.tools = glob_set(plan.allow_tools)   # globs: "*", "mcp__*", "NAMESPACE.*"
        self.features = (frozenset(plan.features) | ({"best_of"} if plan.allow_best_of else set())
                         | ({"cache_salt"} if plan.allow_cache_salt else set()))
        replace = not plan.allow_system_prompt and plan.system_prompt is not None
        self.system_prompt = plan.system_prompt if replace else None
        self.refuse_system = not plan.allow_system_prompt and plan.system_prompt is None
        self.entitlements: dict[frozenset[str] | None, Entitlement] = {}

    def entitlement(self, scopes: frozenset[str] | None) -> Entitlement:
        ent = self.entitlements.get(scopes)
        if ent is None:
            models = self.models if scopes is None else self.models & scopes
            ent = Entitlement(models=models, plan=self.plan, system_prompt=self.system_prompt,
                              features=self.features)
            self.entitlements[scopes] = ent
        return ent


def _feature_denied(name: str, param: str, setting: str) -> Refusal:
    """``setting``: what the plan's operator changes to enable it (validation/plan.py)."""
    return Refusal(Reason.feature_not_entitled, f"{name} is not enabled on your plan{setting}", param=param)


class EntitlementStage(BaseStage):
    name = "entitlement"
    needs = frozenset({"principal"})
    writes = frozenset({"entitlement"})

    def __init__(self, plans: dict[str, PlanConfig], known_models: frozenset[str]) -> None:
        self.rules = {tenant: TenantRules(plan) for tenant, plan in plans.items()}
        # A model no plan could name is not an entitlement question: validation answers
        # unknown_model (404), as OpenAI does.
        self.known_models = known_models

    def decide(self, ctx: RequestContext) -> Refusal | None:
        principal = ctx.principal
        if principal is None:
            return None  # no identity stage configured: nothing to entitle against
        rules = self.rules.get(principal.tenant)
        if rules is None:
            rules = self.rules[principal.tenant] = TenantRules(principal.plan)
        entitlement = rules.entitlement(principal.scopes)
        if ctx.parsed.raw:
            peek = ctx.parsed.peek()   # None: validation refuses the body with the precise error
            if peek is not None:
                refusal = self._check(ctx, rules, entitlement, peek)
                if refusal is not None:
                    return refusal
        ctx.entitlement = entitlement
        return None

    def _check(self, ctx: RequestContext, rules: TenantRules, entitlement: Entitlement,
               peek: PeekFields) -> Refusal | None:
        model = peek.model
        if model.__class__ is str and model not in entitlement.models:
            if model in rules.models:
                return Refusal(Reason.key_scope_denied, f"this API key may not use model {model}", param="model")
            if model in self.known_models:
                return Refusal(Reason.model_not_entitled, f"model {model} is not available on your plan",
                               param="model")
        if peek.tools or peek.functions or peek.tool_choice.__class__ is dict or peek.function_call.__class__ is dict:
            refusal = _check_tools(peek, rules.tools, ctx.route.entitled_name if ctx.route is not None else _same)
            if refusal is not None:
                return refusal
        refusal = _check_features(peek, rules.features)
        if refusal is not None:
            return refusal
        if peek.messages is not None and not rules.plan.allow_system_prompt:
            return _system_prompt(ctx, rules, peek.messages)
        return None


def _same(name: str) -> str:
    return name


def _check_tools(peek: PeekFields, allowed: GlobSet, entitled: Callable[[str], str]) -> Refusal | None:
    """Each tool by the name the plan entitles it by (a Responses namespace's member as
    ``NAMESPACE.TOOL``, though the chat view calls it ``NAMESPACE__TOOL``: Route.entitled_name)."""
    for i, tool in enumerate(peek.tools or ()):
        spec = tool.function if tool.function is not None else tool.custom
        name = spec.name if spec is not None else None
        if isinstance(name, str):
            name = entitled(name)
        # a name of the wrong type (a list, an object) is simply not an allowed name
        if not isinstance(name, str) or name not in allowed:
            kind = "function" if tool.function is not None else "custom" if tool.custom is not None else None
            param = f"tools[{i}].{kind}.name" if kind else f"tools[{i}]"
            shown = name if isinstance(name, str) else "(unnamed)"
            return Refusal(Reason.tools_not_entitled, f"tool {shown} is not allowed on your plan", param=param)
    for i, function in enumerate(peek.functions or ()):
        if not isinstance(function.name, str) or function.name not in allowed:
            shown = function.name if isinstance(function.name, str) else "(unnamed)"
            return Refusal(Reason.tools_not_entitled, f"function {shown} is not allowed on your plan",
                           param=f"functions[{i}].name")
    for name, param in _chosen_tools(peek):
        if isinstance(name, str):
            name = entitled(name)
        if not isinstance(name, str) or name not in allowed:
            shown = name if isinstance(name, str) else "(unnamed)"
            return Refusal(Reason.tools_not_entitled, f"tool {shown} is not allowed on your plan", param=param)
    return None


def _chosen_tools(peek: PeekFields) -> list[tuple[object, str]]:
    """(name, param) of each tool a ``tool_choice`` (or legacy ``function_call``) names: a
    forced choice names a tool even when ``tools`` does not list it. Shapes that name
    nothing ("auto", "none", "required") pass; validation checks the rest of the shape."""
    named: list[tuple[object, str]] = []
    choice = peek.tool_choice
    if choice.__class__ is dict:
        for kind in ("function", "custom"):
            spec = choice.get(kind)
            if isinstance(spec, dict) and "name" in spec:
                named.append((spec["name"], f"tool_choice.{kind}.name"))
        allowed_tools = choice.get("allowed_tools")
        listed = allowed_tools.get("tools") if isinstance(allowed_tools, dict) else None
        for i, tool in enumerate(listed if isinstance(listed, list) else ()):
            spec = tool.get("function") or tool.get("custom") if isinstance(tool, dict) else None
            if isinstance(spec, dict):
                named.append((spec.get("name"), f"tool_choice.allowed_tools.tools[{i}]"))
    call = peek.function_call
    if call.__class__ is dict and "name" in call:
        named.append((call["name"], "function_call.name"))
    return named


def _check_features(peek: PeekFields, features: frozenset[str]) -> Refusal | None:
    best_of = peek.best_of
    if best_of.__class__ is int and best_of > 1 and "best_of" not in features:
        return _feature_denied("best_of", "best_of", "; the plan enables it with `allow_best_of: true`")
    fmt = peek.response_format
    if fmt is not None and fmt.type == "json_schema" and "structured_output" not in features:
        return _feature_denied("structured output (json_schema)", "response_format", feature_hint("structured_output"))
    if (peek.logprobs not in (None, False) or peek.top_logprobs is not None) and "logprobs" not in features:
        return _feature_denied("logprobs", "logprobs" if peek.logprobs not in (None, False) else "top_logprobs",
                               feature_hint("logprobs"))
    if "vllm_extensions" not in features:
        extensions = _astuple(peek)[FIRST_VLLM_FIELD:]
        if extensions != _NO_VLLM:
            # Each field is also enabled by its own name (validation bounds what it lets through).
            for name, value in zip(VLLM_FIELDS, extensions):
                if value is not None and name not in features:
                    return _feature_denied(f"{name} (a vLLM extension)", name, feature_hint(name, "vllm_extensions"))
    return None


def _system_prompt(ctx: RequestContext, rules: TenantRules, messages: Sequence[PeekMessage]) -> Refusal | None:
    has_system = any(m.role in SYSTEM_ROLES for m in messages)
    if rules.refuse_system:
        if has_system:
            return Refusal(Reason.system_prompt_not_allowed,
                           "your plan does not allow setting a system prompt", param="messages")
        return None
    # A consumer plan: the server's prompt replaces whatever the caller sent (or adds it).
    payload = ctx.parsed.edit()
    kept = [m for m in payload["messages"] if not (isinstance(m, dict) and m.get("role") in SYSTEM_ROLES)]
    payload["messages"] = [{"role": "system", "content": rules.system_prompt}, *kept]
    ctx.parsed.rewrite(payload)   # the next version: its peek is decoded afresh when asked
    ctx.note("system_prompt", "replaced" if has_system else "added")
    return None


def build(config: Config) -> EntitlementStage:
    return EntitlementStage({tenant: effective_plan(config, tenant) for tenant in config.tenants},
                            frozenset(config.models))
