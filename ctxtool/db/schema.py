"""SQLAlchemy Core descriptions of the store's tables, for building queries.

The DDL itself lives in the versioned ``sql/<dialect>/`` files; these objects only name the
columns so queries are written once for every dialect. ``tests/test_migrate.py`` checks that the
two agree.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles

from .stored_time import StoredTime

metadata = sa.MetaData()
# The largest id or count both databases take: BIGINT, SQLite's INTEGER (signed 64-bit). A
# larger Python int is an OverflowError in SQLite's driver and a syntax error in a MySQL LIMIT.
BIGINT_MAX = 2**63 - 1
# A runtime may have written a time in another shape, or a zero date (see stored_time).
_TIME = StoredTime()

agent_session = sa.Table(
    "agent_session",
    metadata,
    sa.Column("session_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("user_id", sa.String(191)),
    sa.Column("project_id", sa.String(191)),
    sa.Column("title", sa.String(512)),
    sa.Column("created_at", _TIME),
    sa.Column("updated_at", _TIME),
    sa.Column("model", sa.String(191)),
    sa.Column("system_prompt", sa.Text),
    sa.Column("source_format", sa.String(32)),
    sa.Column("source_id", sa.String(191)),
    sa.Column("details", sa.JSON(none_as_null=True)),
    sa.Column("lease_owner", sa.String(191)),
    sa.Column("lease_expires_at", _TIME),
    sa.Column("over_window_ok_at", _TIME),  # the operator's acknowledgement (0008)
)

agent_message = sa.Table(
    "agent_message",
    metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("session_id", sa.BigInteger, nullable=False),
    sa.Column("role", sa.String(32), nullable=False),
    sa.Column("content", sa.Text),
    sa.Column("created_at", _TIME),
    sa.Column("tool_calls", sa.JSON(none_as_null=True)),
    sa.Column("tool_call_id", sa.String(191)),
    sa.Column("name", sa.String(191)),
    sa.Column("token_count", sa.Integer),
    sa.Column("token_encoding", sa.String(32)),
    sa.Column("source_id", sa.String(191)),
    sa.Column("details", sa.JSON(none_as_null=True)),
    # How many tool calls tool_calls holds, computed by the server and never stored (0009): it
    # lets the sums over restored suffixes read idx_message_session_id_tokens alone.
    sa.Column(
        "tool_call_count", sa.Integer, sa.Computed("JSON_LENGTH(tool_calls)", persisted=False)
    ),
    # The id of an assistant message's one tool call, where the server and Message read it
    # alike, else NULL; computed by the server and never stored (0012): the pairing proof
    # (store.reads.calls_answered_next) reads idx_message_session_id_tokens alone.
    # The guards that make it NULL are in sql/*/0012_call_id_index.sql.
    sa.Column(
        "call_id",
        sa.String(191),
        sa.Computed("JSON_UNQUOTE(JSON_EXTRACT(tool_calls, '$[0].id'))", persisted=False),
    ),
)

agent_compaction = sa.Table(
    "agent_compaction",
    metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("session_id", sa.BigInteger, nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("first_kept_message_id", sa.BigInteger, nullable=False),
    sa.Column("tokens_before", sa.Integer),
    sa.Column("created_at", _TIME),
    sa.Column("parent_compaction_id", sa.BigInteger),  # NULL: a runtime recorded none (0006)
    sa.Column("summary_tokens", sa.Integer),
    sa.Column("tokens_after", sa.Integer),
    sa.Column("summarizer", sa.String(64)),
    sa.Column("summarizer_model", sa.String(191)),
    sa.Column("source_id", sa.String(191)),
    sa.Column("details", sa.JSON(none_as_null=True)),
)

STORE_TABLES = (agent_session, agent_message, agent_compaction)

# ctxtool's own counters (migration 0004), not a runtime's table: one row per kind of id
# ctxtool hands out, holding the last one handed out.
counters = sa.Table(
    "ctxtool_counters",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True, autoincrement=False),
    sa.Column("last_value", sa.BigInteger, nullable=False),
)
SESSION_ID_COUNTER = "agent_session.session_id"

# The file each transcript without a session id of its own was imported from, by inode
# (migration 0010): a name it is given later, anywhere, finds its session (store.transcript_files).
transcript_files = sa.Table(
    "ctxtool_transcript_files",
    metadata,
    sa.Column("device", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("inode", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("head_bytes", sa.Integer, nullable=False),
    sa.Column("head_sha256", sa.String(64), nullable=False),
    sa.Column("source_format", sa.String(32), nullable=False),
    sa.Column("source_id", sa.String(191), nullable=False),
)

# Each session's restored-suffix sums as `compact --all` last summed them (migration 0011): a
# cache that spares later runs a walk of the whole message index (store.context_sums).
context_sums = sa.Table(
    "ctxtool_context_sums",
    metadata,
    sa.Column("session_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("checkpoint_id", sa.BigInteger, nullable=False),
    sa.Column("token_encoding", sa.String(32), nullable=False),
    sa.Column("through_message_id", sa.BigInteger, nullable=False),
    sa.Column("messages", sa.BigInteger, nullable=False),
    sa.Column("tokens", sa.BigInteger, nullable=False),
    sa.Column("uncounted", sa.BigInteger, nullable=False),
    sa.Column("calls", sa.BigInteger, nullable=False),
    sa.Column("results", sa.BigInteger, nullable=False),
    sa.Column("foreign_roles", sa.BigInteger, nullable=False),
    sa.Column("longest_result_id", sa.BigInteger, nullable=False),
    sa.Column("paired_through", sa.BigInteger, nullable=True),
)

# The message columns an importer writes besides session_id (the rest are the id, and counts
# filled later). The one list: the bulk insert, the importer's rows and the tests take it from
# here. The session id, the same in every row of an import, is written into its INSERT
# statements once, so a row holds one value less to pack and for the server to convert.
MESSAGE_ROW_COLUMNS = (
    "role",
    "content",
    "created_at",
    "tool_calls",
    "tool_call_id",
    "name",
    "source_id",
    "details",
)

# ctxtool's own migration history. Not in sql/: it must exist before the first file runs, and it
# is created from this description on every dialect (``create(checkfirst=True)``).
HISTORY_TABLE = "ctxtool_schema_history"


class Microseconds(sa.DateTime):
    """A time kept to the microsecond: DATETIME(6) in MySQL's and MariaDB's DDL. Said by a
    compile rule, not a variant of the MySQL dialect's DATETIME, so that a command on a SQLite
    store does not import that dialect (docs/benchmarks.md)."""

    cache_ok = True


class LongText(sa.Text):
    """A text of up to 16 MB: MEDIUMTEXT in MySQL's and MariaDB's DDL (see Microseconds)."""

    cache_ok = True


@compiles(Microseconds, "mysql")
@compiles(Microseconds, "mariadb")
def _microseconds(type_, compiler, **kw) -> str:
    return "DATETIME(6)"


@compiles(LongText, "mysql")
@compiles(LongText, "mariadb")
def _long_text(type_, compiler, **kw) -> str:
    return "MEDIUMTEXT"


_MICROSECONDS = Microseconds()
_LONG_TEXT = LongText()
schema_history = sa.Table(
    HISTORY_TABLE,
    sa.MetaData(),
    sa.Column("version", sa.String(32), primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(191), nullable=False),
    sa.Column("checksum", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("started_at", _MICROSECONDS, nullable=False),
    sa.Column("applied_at", _MICROSECONDS),
    sa.Column("duration_ms", sa.Integer),
    # Where DDL is not transactional, how many of the file's statements have taken effect, so
    # an interrupted or repaired file resumes there instead of failing on its own first column.
    sa.Column("statements_done", sa.Integer),
    sa.Column("failed_statement", _LONG_TEXT),
    sa.Column("error", sa.Text),
)


def mysql_table_options(table: sa.Table, collation: str) -> None:
    """Create ``table`` in MySQL and MariaDB as InnoDB in utf8mb4 with ``collation``. Set
    when the table is created rather than given to ``sa.Table``: those arguments make
    SQLAlchemy load its MySQL dialect to check them, on every command, SQLite's too."""

    @sa.event.listens_for(table, "before_create")
    def _options(target, connection, **kw) -> None:
        if connection.dialect.name in ("mysql", "mariadb"):
            target.dialect_kwargs.update(
                mysql_engine="InnoDB", mysql_charset="utf8mb4", mysql_collate=collation
            )


mysql_table_options(schema_history, "utf8mb4_unicode_ci")
