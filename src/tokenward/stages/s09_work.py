"""Work: what the request may cost at worst, in tokens, before anyone reserves it.

Prompt tokens are counted with the model's tokenizer (``tokenize``; ``estimate`` is a
never-undercounting bound). Then:

- ``context_too_large`` when the largest outer item's prompt plus the clamped output
  exceeds the smaller of the plan's ``max_context_tokens`` and the model's
  ``context_window``. The prompt is taken at its *lower* bound: an exact count is its
  own bound, ``estimate``'s is bytes / 128, so a refusal happens only where the prompt is
  certainly too long, never because an upper bound is loose (the backend refuses the
  rest itself, before generating: ``upstream_rejected``);
- aggregate work = candidates x (sum of the items' input tokens + items x max output)
  + surcharges (the plan's ``structured_output_surcharge`` for a constrained output,
  each attachment's surcharge and size bound); with equal items that is the familiar
  items x max(n, best_of) x (input + max output) + surcharges;
- ``aggregate_work_limit`` when that exceeds the plan's ``max_request_work``.

Texts the body carries beyond the validated request (a natively forwarded dialect body's
thinking blocks, reasoning summaries, metadata: ``Route.outside_prompt``) are counted on
top of the prompt, opaque state (signatures, encrypted content) at one token a byte. A
*stateful* request (``Route.stateful``: the backend reads a stored response, a
conversation, a container the gateway cannot see) has its prompt side reserved at the
context limit: the backend's report of a longer prompt is then clamped to what was
reserved, never to the gateway's count of what the client sent.

The result is ``ctx.work`` (``pipeline.results.Work``); the admission stage reserves its
``reserve_tokens``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config.schema import Config, ModelConfig
from ..errors import Reason, Refusal
from ..pipeline.results import Work
from ..pipeline.stage import BaseStage
from ..tokenize.counters import Counter
from ..tokenize.registry import TokenizerRegistry
from ..tokenize.requests import prompt_tokens
from ..validation.result import NormalizedRequest

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext

_INPUT_FIELD = {"chat": "messages", "completions": "prompt", "embeddings": "input"}


class WorkStage(BaseStage):
    name = "work"
    needs = frozenset({"request"})
    writes = frozenset({"work"})

    def __init__(self, models: dict[str, ModelConfig], counters: dict[str, Counter]) -> None:
        self.windows = {name: spec.context_window for name, spec in models.items()}
        self.counters = counters

    def decide(self, ctx: RequestContext) -> Refusal | None:
        request = ctx.request
        if not isinstance(request, NormalizedRequest):
            return None  # a route validation does not cover (GET /v1/models)
        counter = self.counters[request.model]
        items = prompt_tokens(request, counter)
        route = ctx.route
        outside, opaque = route.outside_prompt() if route is not None else ((), 0)
        if outside or opaque:
            # what the body carries beyond the validated request (a native dialect body's
            # thinking, reasoning, metadata; opaque state at one token a byte)
            items[0] += sum([counter.count(text) for text in outside]) + opaque
        plan = ctx.plan
        max_out = request.max_output_tokens
        limit = min(plan.max_context_tokens, self.windows[request.model])
        # validation refuses a request with no input item. One loop for the largest and the
        # sum: compiled, max() with a default and sum() are generic calls.
        most = items[0] if items else 0
        input_tokens = 0
        for count in items:
            input_tokens += count
            if count > most:
                most = count
        largest = counter.lower_bound(most)
        if largest + max_out > limit:
            least = "" if counter.exact else "at least "
            return Refusal(
                Reason.context_too_large,
                f"This request needs {least}{largest} prompt tokens plus {max_out} output tokens; "
                f"the limit is {limit} tokens", param=_INPUT_FIELD[request.route])
        stateful = route is not None and route.stateful
        if stateful:
            # the backend reads context the request does not carry (a stored response, a
            # container): the prompt may be as long as the context allows
            input_tokens = max(input_tokens, limit)
        surcharge = request.attachment_tokens
        if request.structured_output:
            surcharge += plan.structured_output_surcharge
        outer = len(items)
        reserve = request.candidates * (input_tokens + outer * max_out) + surcharge
        if reserve > plan.max_request_work:
            return Refusal(
                Reason.aggregate_work_limit,
                f"This request may cost {reserve} tokens of work ({outer} items x {request.candidates} "
                f"candidates x (input + {max_out} output) + {surcharge}); the plan allows {plan.max_request_work}",
                param=_work_param(request, outer))
        ctx.work = Work(input_tokens=input_tokens, max_output_tokens=max_out, outer_items=outer,
                        candidates=request.candidates, surcharge=surcharge, reserve_tokens=reserve,
                        tokenizer=counter.spec, stateful=stateful)
        return None


def _work_param(request: NormalizedRequest, outer: int) -> str:
    """The field that multiplies the work most, for the error's ``param``."""
    if outer > 1:
        return _INPUT_FIELD[request.route]
    if request.candidates > 1:
        return "best_of" if request.best_of == request.candidates else "n"
    return "max_tokens" if request.max_output_tokens else _INPUT_FIELD[request.route]


def build(config: Config, tokenizers: TokenizerRegistry) -> WorkStage:
    return WorkStage(config.models, tokenizers.counters)
