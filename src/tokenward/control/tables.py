"""The controls table, beside the key store's tables in the same database (SQLite or
PostgreSQL); audit records go to the key store's own audit table, one trail for both."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

controls = sa.Table(
    "tokenward_controls", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("tenant", sa.String(200), nullable=False, index=True),
    sa.Column("key_id", sa.String(200), index=True),
    sa.Column("capability", sa.String(240)),
    sa.Column("params", sa.JSON),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("rule", sa.String(200)),
    sa.Column("signals", sa.JSON),
    sa.Column("automatic", sa.Boolean, nullable=False),
    sa.Column("by", sa.String(200), nullable=False),
    sa.Column("shadow", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("until", sa.Double),
    sa.Column("cleared_at", sa.Double),
    sa.Column("cleared_by", sa.String(200)),
    sa.Column("cleared_reason", sa.Text),
    sa.Column("appeal", sa.String(32)),
    # what every replica reads on each refresh: the controls not cleared and not yet ended
    sa.Index("ix_tokenward_controls_live", "cleared_at", "until"),
)
