"""Abuse signals: per key and per tenant, each against its own history, computed from the
decision stream in batches off the request path, kept in the shared store; a declarative
policy turns them into graduated actions (control/). docs/abuse.md."""
