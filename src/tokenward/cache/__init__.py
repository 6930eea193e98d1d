"""The per-tenant response cache: entries, their keys, the capture of answers, the stores."""
