"""Multi-row INSERTs as server-side prepared statements, over PyMySQL's own connection.

A text INSERT makes the server parse every value it carries: for an import's 1 MB statements
that was 45% of the server's work (MariaDB's profiler: 11.8 of 26.6 ms in "Starting"). A
prepared statement is parsed once; each execution sends its values in the binary protocol,
as length-prefixed bytes that need no escaping and no parsing (scripts/bench_import.py: the
server's CPU for 100k messages fell by about a quarter). PyMySQL speaks only the text protocol,
so the three commands used here (COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_CLOSE; MySQL
manual, "Prepared Statements" in the client/server protocol, the same in MySQL 8 and MariaDB)
are written on its packet layer: ``_execute_command`` sends a command (splitting what is over
16 MB into packets) and ``_read_packet`` reads a reply, raising the server's error as PyMySQL's
own exception. Both have been PyMySQL's since its first releases.

Packing the values (:func:`pack_rows`) is pure and runs on the parsing thread; the statements
are prepared, executed and closed on the connection's thread.
"""

from __future__ import annotations

import struct
from typing import Sequence

COM_STMT_PREPARE = 0x16
COM_STMT_EXECUTE = 0x17
COM_STMT_CLOSE = 0x19
MAX_PARAMS = 65535  # placeholders one statement may hold (a 2-byte count in the protocol)
_STRING = b"\xfe\x00"  # MYSQL_TYPE_STRING: every value goes as text, as in a literal
_STRING_CHARS = _STRING.decode("latin-1")
_LENGTH1_CHAR = [chr(n) for n in range(251)]  # a length under 251 is one byte


def _length_chars(n: int) -> str:
    """A protocol length-encoded integer (the prefix of a string value), a byte a character."""
    if n < 251:
        return _LENGTH1_CHAR[n]
    if n < 1 << 16:
        return ("\xfc" + n.to_bytes(2, "little").decode("latin-1"))
    if n < 1 << 24:
        return ("\xfd" + n.to_bytes(3, "little").decode("latin-1"))
    return "\xfe" + n.to_bytes(8, "little").decode("latin-1")


class CannotPrepare(Exception):
    """The server refused to prepare the statement (at its max_prepared_stmt_count, or a proxy
    without prepared statements): the caller sends text instead."""


class Execution:
    """One COM_STMT_EXECUTE of a statement of ``count`` rows: its body without the statement
    id (known only once the statement is prepared, on the connection's thread). ``rows`` are
    kept for a connection that cannot prepare (see ``PreparedInsert``)."""

    __slots__ = ("count", "body", "rows")

    def __init__(self, count: int, body: bytes, rows: list[tuple]):
        self.count, self.body, self.rows = count, body, rows


def pack_rows(rows: Sequence[tuple], columns: int, max_bytes: int) -> list[Execution] | None:
    """The rows as executions of a multi-row INSERT, each at most ``max_bytes`` (a single larger
    row goes alone) and MAX_PARAMS placeholders. Strings are sent as UTF-8, integers as their
    decimal text (the server converts them as it does a literal), None as NULL. None when a
    value is of another type: the caller renders those rows as text.

    The body is built as a str of code points below 256, one per byte, and encoded as Latin-1
    once (a copy): an ASCII text is its own bytes, so only the others are encoded one by one
    (half the cost of encoding every value)."""
    per_statement = MAX_PARAMS // columns
    row_overhead = 2 * columns + 9 * columns  # its types and, at most, its length prefixes
    short, length = _LENGTH1_CHAR, _length_chars
    out: list[Execution] = []
    start, total = 0, len(rows)
    while start < total:
        parts: list[str] = [""]  # [0]: the header, once the row count is known
        add = parts.append
        nulls = bytearray((min(per_statement, total - start) * columns + 7) // 8)
        size = i = 0
        end = start
        limit = min(total, start + per_statement)
        while end < limit:
            mark = len(parts)
            for v in rows[end]:
                if v is None:
                    nulls[i >> 3] |= 1 << (i & 7)
                else:
                    if type(v) is not str:
                        if type(v) is not int:
                            return None
                        v = str(v)
                    elif not v.isascii():
                        v = v.encode().decode("latin-1")  # its UTF-8 bytes, one per character
                    n = len(v)
                    add(short[n] if n < 251 else length(n))
                    add(v)
                    size += n
                i += 1
            size += row_overhead
            if size > max_bytes and end > start:
                # This row starts the next execution: take back its values and NULL bits.
                del parts[mark:]
                i -= columns
                for k in range(i, i + columns):
                    nulls[k >> 3] &= ~(1 << (k & 7)) & 0xFF
                break
            end += 1
        params = (end - start) * columns
        parts[0] = "".join(["\x00\x01\x00\x00\x00", nulls[:(params + 7) // 8].decode("latin-1"),
                            "\x01", _STRING_CHARS * params])
        out.append(Execution(end - start, "".join(parts).encode("latin-1"), rows[start:end]))
        start = end
    return out


class PreparedInsert:
    """The prepared multi-row INSERTs of one import, one per row count seen, on one PyMySQL
    connection. Closed at the end (a pooled connection outlives the import, and the server
    counts every connection's statements against one global max_prepared_stmt_count)."""

    def __init__(self, dbapi_connection, head: str, row: str):
        self.connection = dbapi_connection
        self.head, self.row = head, row
        self.statements: dict[int, int] = {}  # row count -> statement id

    def execute(self, execution: Execution) -> None:
        """Run one execution; the server's error is raised as PyMySQL's exception."""
        stmt_id = self.statements.get(execution.count)
        if stmt_id is None:
            stmt_id = self._prepare(execution.count)
        conn = self.connection
        conn._execute_command(COM_STMT_EXECUTE, struct.pack("<I", stmt_id) + execution.body)
        packet = conn._read_packet()  # an error packet raises here
        if not packet.is_ok_packet():
            raise _protocol_error(conn, "no OK packet after a prepared INSERT")
        _skip_ok_counts(packet)
        conn.server_status = struct.unpack("<H", packet.read(2))[0]

    def _prepare(self, count: int) -> int:
        conn = self.connection
        sql = self.head + ",".join([self.row] * count)
        conn._execute_command(COM_STMT_PREPARE, sql.encode("utf-8"))
        try:
            first = conn._read_packet().get_all_data()
        except Exception as exc:  # the server's error packet, raised by PyMySQL
            if conn.open and getattr(exc, "args", None) and isinstance(exc.args[0], int):
                raise CannotPrepare(exc) from exc
            raise
        if first[:1] != b"\x00" or len(first) < 9:
            raise _protocol_error(conn, "unexpected reply to COM_STMT_PREPARE")
        stmt_id, columns, params = struct.unpack_from("<IHH", first, 1)
        # The definitions of its parameters and result columns, each list ended by an EOF
        # packet (PyMySQL does not ask for CLIENT_DEPRECATE_EOF).
        for n in (params, columns):
            if n:
                for _ in range(n + 1):
                    conn._read_packet()
        self.statements[count] = stmt_id
        return stmt_id

    def close(self) -> None:
        """Deallocate the statements (COM_STMT_CLOSE has no reply). A connection already lost
        has lost them with it."""
        statements, self.statements = self.statements, {}
        for stmt_id in statements.values():
            try:
                self.connection._execute_command(COM_STMT_CLOSE, struct.pack("<I", stmt_id))
            except Exception:  # the connection is gone: so are its statements
                return


def _skip_ok_counts(packet) -> None:
    packet.advance(1)
    packet.read_length_encoded_integer()  # affected rows
    packet.read_length_encoded_integer()  # last insert id


def _protocol_error(conn, what: str) -> Exception:
    """A reply out of step with the protocol: the connection cannot be trusted any more."""
    from pymysql.err import OperationalError

    conn._force_close()
    return OperationalError(2027, f"malformed packet: {what}")
