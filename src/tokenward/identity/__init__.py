"""Who the caller is: credential extraction, API-key verification and OIDC/JWT bearer tokens."""
