from collections.abc import Sequence

class ExtractResult:
    subdomain: str
    domain: str
    suffix: str
    @property
    def fqdn(self) -> str: ...

class TLDExtract:
    def __init__(self, cache_dir: str | None = ..., suffix_list_urls: Sequence[str] = ...,
                 fallback_to_snapshot: bool = True, include_psl_private_domains: bool = False,
                 extra_suffixes: Sequence[str] = (), cache_fetch_timeout: str | float | None = None) -> None: ...
    def __call__(self, url: str, include_psl_private_domains: bool | None = None,
                 session: object = None) -> ExtractResult: ...
