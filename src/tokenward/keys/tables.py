"""The key store's two tables, as SQLAlchemy Core (the same schema on SQLite and PostgreSQL).

Times are unix seconds as doubles: one representation for both databases, no time zones.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

api_keys = sa.Table(
    "tokenward_api_keys", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("tenant", sa.String(200), nullable=False, index=True),
    sa.Column("name", sa.String(200)),
    # HMAC-SHA256 of the secret (hex); the secret itself is never stored.
    sa.Column("secret_hash", sa.String(64), nullable=False),
    sa.Column("models", sa.JSON),
    sa.Column("environments", sa.JSON),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("suspended_until", sa.Double),
    sa.Column("expires_at", sa.Double),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("last_used_at", sa.Double),
    # the key's own limits (config/key_limits.py); added after the first release, so a
    # table created before them gets them at open (sql.py, add_missing_columns)
    sa.Column("daily_spend_usd", sa.Double),
    sa.Column("monthly_spend_usd", sa.Double),
    sa.Column("tokens_per_minute", sa.BigInteger),
)

key_audit = sa.Table(
    "tokenward_key_audit", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key_id", sa.String(32), nullable=False, index=True),
    sa.Column("tenant", sa.String(200), nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("scope", sa.Text, nullable=False),
    sa.Column("duration_s", sa.Double),
    sa.Column("reviewer", sa.String(200)),
    sa.Column("at", sa.Double, nullable=False),
    sa.Column("detail", sa.JSON),
)
