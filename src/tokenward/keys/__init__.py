"""API keys: the store (SQLite or PostgreSQL), the key format, the cache and the audit trail."""

from .model import AuditRecord, KeyNotFound, KeyRecord, KeyStateError, KeyStoreError, parse_duration
from .store import KeyStore, open_keystore

__all__ = ["AuditRecord", "KeyNotFound", "KeyRecord", "KeyStateError", "KeyStoreError", "KeyStore",
           "open_keystore", "parse_duration"]
