"""The declarative policy: which rules fire on a subject's signals, and what they propose.

Pure. A rule fires when every signal it names is at or above its threshold. Of the rules
that fire on one subject, the most severe action is proposed (a reduce and a suspend
firing together: the suspend), and a stronger one in shadow beside it; the engine then leaves out what an exemption covers and
what an action already in force covers (the same action, or a stronger one).
"""

from __future__ import annotations

from typing import NamedTuple

from ..config.abuse import ACTIONS, AbuseConfig, AbuseRule

SEVERITY = {name: i for i, name in enumerate(ACTIONS)}


class Proposal(NamedTuple):
    rule: AbuseRule
    tenant: str
    key_id: str | None          # None: the tenant as a whole
    signals: dict[str, float]
    shadow: bool                # record the would-be action only

    @property
    def action(self) -> str:
        return self.rule.action

    @property
    def severity(self) -> int:
        return SEVERITY[self.rule.action]


def fires(rule: AbuseRule, signals: dict[str, float]) -> bool:
    return all(signals.get(name, 0.0) >= threshold for name, threshold in rule.when.items())


def propose(config: AbuseConfig, subject: str, tenant: str, key_id: str | None,
            signals: dict[str, float]) -> list[Proposal]:
    """What the rules for this kind of subject ("key" or "tenant") propose: the strongest
    enforced action, and the strongest shadow one when it is stronger still (a rule being
    tried in shadow above an enforced one)."""
    enforced: Proposal | None = None
    shadow: Proposal | None = None
    for rule in config.rules:
        if rule.subject != subject or not fires(rule, signals):
            continue
        is_shadow = config.shadow or rule.shadow or rule.action == "record"
        proposal = Proposal(rule, tenant, key_id, signals, is_shadow)
        if is_shadow:
            if shadow is None or proposal.severity > shadow.severity:
                shadow = proposal
        elif enforced is None or proposal.severity > enforced.severity:
            enforced = proposal
    out = [enforced] if enforced is not None else []
    if shadow is not None and (enforced is None or shadow.severity > enforced.severity):
        out.append(shadow)
    return out
