"""Enforcement controls: abuse actions, pauses, exemptions and cancels; their SQL repo and audit, the replicated view, open requests, the admin routes and the status page."""
