"""The database layer: the engine factory, one dialect object per database family, the table
descriptions, and database errors as one line. Nothing outside this package names a dialect."""

from .dialects import Dialect, dialect_of
from .engine import create_database, create_engine, read_connection
from .error_text import describe_db_error
from .retry import DEFAULT_POLICY, RetryPolicy, retry_transaction, server_given_up
from .urls import DEFAULT_URL, URL_ENV, URL_ENVS, mask_url, resolve_url, scrub

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_URL",
    "URL_ENV",
    "URL_ENVS",
    "Dialect",
    "RetryPolicy",
    "create_database",
    "create_engine",
    "describe_db_error",
    "dialect_of",
    "mask_url",
    "read_connection",
    "resolve_url",
    "retry_transaction",
    "scrub",
    "server_given_up",
]
