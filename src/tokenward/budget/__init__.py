"""Budgets: pure arithmetic (policy), storage (memory, Redis), leases and admission."""
