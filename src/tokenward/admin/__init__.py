"""The admin API: key lifecycle over HTTP under /admin/, behind an admin bearer token."""

from .api import AdminApi

__all__ = ["AdminApi"]
