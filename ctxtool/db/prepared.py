"""Multi-row INSERTs as server-side prepared statements, over PyMySQL's own connection.

A text INSERT makes the server parse every value it carries, a large part of its work on an
import's large statements. A prepared statement is parsed once; each execution sends its values
in the binary protocol, as length-prefixed bytes that need no escaping and no parsing (the
figures: docs/benchmarks.md, "Figures behind the code"). PyMySQL speaks only the text protocol,
so the three commands used here (COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_CLOSE; the same
in MySQL 8 and MariaDB for the capabilities PyMySQL asks for, checked on every connection) are
written on its packet layer: ``_execute_command`` sends a command (splitting what is over 16 MB
into packets), ``_read_packet``/``_read_bytes`` read the reply, raising the server's error as
PyMySQL's own exception.

A prepared statement has a fixed number of rows, and the server keeps each one (a few MB for
1024 rows of eight parameters, counted against a max_prepared_stmt_count shared by every client).
So executions hold a power of two of rows, MIN_ROWS to MAX_ROWS: at most five statements an
import, each prepared once. Fewer rows than MIN_ROWS (the end of an import, rows of over 16 KB
each) go as text.

Packing the values (:func:`pack_rows`) is pure and runs on the parsing thread; the statements
are prepared, executed and closed on the connection's thread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

COM_STMT_PREPARE = 0x16
COM_STMT_EXECUTE = 0x17
COM_STMT_CLOSE = 0x19
MAX_PARAMS = 65535  # placeholders one statement may hold (a 2-byte count in the protocol)
MIN_ROWS, MAX_ROWS = 64, 1024  # rows of an execution: a power of two between these
# Capabilities that change the replies or the execute layout used here; PyMySQL 1.x asks for
# none of them (a connection that has one gets text INSERTs).
CLIENT_OPTIONAL_RESULTSET_METADATA = 1 << 25
CLIENT_QUERY_ATTRIBUTES = 1 << 27
CLIENT_DEPRECATE_EOF = 1 << 24
# Server errors after which text INSERTs still work: too many prepared statements on the
# server (1461), no prepared statements (1295, 1047: proxies and old servers).
CANNOT_PREPARE = {1461, 1295, 1047}
_STRING = "\xfe\x00"  # MYSQL_TYPE_STRING: every value goes as text, as in a literal
_LENGTH1 = [chr(n) for n in range(251)]  # a length under 251 is one byte


def _length(n: int) -> str:
    """A protocol length-encoded integer (the prefix of a string value), a byte a character."""
    if n < 251:
        return _LENGTH1[n]
    if n < 1 << 16:
        return "\xfc" + n.to_bytes(2, "little").decode("latin-1")
    if n < 1 << 24:
        return "\xfd" + n.to_bytes(3, "little").decode("latin-1")
    return "\xfe" + n.to_bytes(8, "little").decode("latin-1")


class CannotPrepare(Exception):
    """This connection cannot use prepared statements (see CANNOT_PREPARE and the
    capabilities above): the caller sends text instead."""


class Execution:
    """``count`` rows, in order: ``body`` is their COM_STMT_EXECUTE without the statement id
    (known only once the statement is prepared, on the connection's thread), or None for rows
    to send as text. ``rows`` are kept for a connection that cannot prepare."""

    __slots__ = ("count", "body", "rows")

    def __init__(self, count: int, body: bytes | None, rows: Sequence[tuple]):
        self.count, self.body, self.rows = count, body, rows


def pack_rows(rows: Sequence[tuple], columns: int, max_bytes: int) -> list[Execution] | None:
    """The rows, in order, as executions of a prepared multi-row INSERT of a power of two of
    rows (MIN_ROWS to MAX_ROWS), each at most ``max_bytes``, and as text where fewer rows are
    left or fit. Strings are sent as UTF-8, integers as their decimal text (the server converts
    them as it does a literal), None as NULL. None when a value is of another type: the caller
    renders all of these rows as text.

    The body is built as a str of code points below 256, one per byte, and encoded as Latin-1
    once (a copy): an ASCII text is its own bytes, so only the others are encoded one by one.
    This loop runs for every value an import sends: its state is local variables, a row's NULL
    bits one int (the pending rows' bits another, row 0 in the lowest bits).
    """
    cap = MAX_ROWS
    while cap * columns > MAX_PARAMS:
        cap //= 2
    if cap < MIN_ROWS:
        return None
    row_overhead = 2 * columns + 9 * columns  # its types and, at most, its length prefixes
    short, length = _LENGTH1, _length
    out: list[Execution] = []
    pending = _Pending()  # its lists change in place: these names stay bound to them
    parts, marks, ends, add = pending.parts, pending.marks, pending.ends, pending.parts.append
    nulls = 0
    first = 0  # index in rows of the first pending row
    count = total = 0  # the pending rows, their bytes
    for row in rows:
        if count == cap:
            out.append(pending.take(cap, nulls, columns, rows, first))
            first += cap
            nulls = count = total = 0
        marks.append(len(parts))
        size, bits, bit = row_overhead, 0, 1
        for v in row:
            if v is None:
                bits |= bit
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
            bit <<= 1
        if bits:
            nulls |= bits << (columns * count)
        count += 1
        total += size
        ends.append(total)
        if total > max_bytes and count > 1:
            # This row does not fit with the pending ones: send enough of those first (a single
            # row larger than max_bytes goes alone; its size was checked against the packet).
            before = count - 1
            while before >= MIN_ROWS and ends[-1] > max_bytes:
                k = 1 << (before.bit_length() - 1)
                out.append(pending.take(k, nulls, columns, rows, first))
                first += k
                nulls >>= k * columns
                before -= k
            if ends[-1] > max_bytes and before:
                # Fewer than MIN_ROWS: as text; only this row stays pending.
                out.append(Execution(before, None, rows[first : first + before]))
                first += before
                nulls >>= before * columns
                pending.drop(before)
            count, total = len(marks), ends[-1]
    while count >= MIN_ROWS:
        k = 1 << (count.bit_length() - 1)
        out.append(pending.take(k, nulls, columns, rows, first))
        first += k
        nulls >>= k * columns
        count -= k
    if first < len(rows):
        out.append(Execution(len(rows) - first, None, rows[first:]))
    return out


class _Pending:
    """The values of the rows packed but not yet in an execution (see pack_rows)."""

    def __init__(self):
        self.parts: list[str] = [""]  # their values; [0]: the header, once they go out
        self.marks: list[int] = []  # where each row's values start in parts
        self.ends: list[int] = []  # their bytes, up to and including each row

    def take(
        self, k: int, nulls: int, columns: int, rows: Sequence[tuple], first: int
    ) -> Execution:
        """The first k pending rows (k a power of two of at least MIN_ROWS, so their k * columns
        NULL bits are whole bytes) as one execution; the rest stay pending."""
        params, marks = k * columns, self.marks
        cut = marks[k] if k < len(marks) else len(self.parts)
        bits = (nulls & ((1 << params) - 1)).to_bytes(params // 8, "little")
        self.parts[0] = "".join(
            ["\x00\x01\x00\x00\x00", bits.decode("latin-1"), "\x01", _STRING * params]
        )
        body = "".join(self.parts[:cut]).encode("latin-1")
        self._keep(k, cut)
        return Execution(k, body, rows[first : first + k])

    def drop(self, k: int) -> None:
        """The first k pending rows went as text."""
        self._keep(k, self.marks[k])

    def _keep(self, k: int, cut: int) -> None:
        """Forget the first k rows (their values end at parts[cut]), in place."""
        del self.parts[1:cut]
        self.parts[0] = ""
        self.marks[:] = [m - cut + 1 for m in self.marks[k:]]
        done = self.ends[k - 1]
        self.ends[:] = [e - done for e in self.ends[k:]]


class PreparedInsert:
    """The prepared multi-row INSERTs of one import, one per row count, on one PyMySQL
    connection. Closed at the end (a pooled connection outlives the import)."""

    def __init__(self, dbapi_connection, head: str, row: str):
        self.connection = dbapi_connection
        self.head, self.row = head, row
        self.statements: dict[int, int] = {}  # row count -> statement id

    # What this module uses of PyMySQL's connection beyond its public API.
    DRIVER_INTERNALS = (
        "_execute_command",
        "_read_packet",
        "_read_bytes",
        "_next_seq_id",
        "_force_close",
        "server_capabilities",
        "client_flag",
        "open",
    )

    @classmethod
    def usable(cls, dbapi_connection) -> bool:
        """Whether the driver's connection has the packet layer this module writes on (a
        PyMySQL release that renamed it gets text INSERTs, not an AttributeError)."""
        return all(hasattr(dbapi_connection, name) for name in cls.DRIVER_INTERNALS)

    def execute(self, execution: Execution) -> None:
        """Run one execution; the server's error is raised as PyMySQL's exception."""
        stmt_id = self.statements.get(execution.count)
        if stmt_id is None:
            stmt_id = self._prepare(execution.count)
        conn, body = self.connection, execution.body
        assert body is not None, "rows that go as text are never executed as prepared"
        conn._execute_command(COM_STMT_EXECUTE, struct.pack("<I", stmt_id) + body)
        packet = conn._read_packet()  # an error packet raises here
        if not packet.is_ok_packet():
            raise _protocol_error(conn, "no OK packet after a prepared INSERT")
        try:
            packet.advance(1)
            packet.read_length_encoded_integer()  # affected rows
            packet.read_length_encoded_integer()  # last insert id
            conn.server_status = struct.unpack("<H", packet.read(2))[0]
        except (AssertionError, struct.error, IndexError) as exc:  # a truncated packet
            raise _protocol_error(conn, "a truncated OK packet after a prepared INSERT") from exc

    def _prepare(self, count: int) -> int:
        conn = self.connection
        capabilities = conn.server_capabilities & conn.client_flag
        if capabilities & (CLIENT_QUERY_ATTRIBUTES | CLIENT_OPTIONAL_RESULTSET_METADATA):
            raise CannotPrepare("the connection's capabilities change the execute layout")
        conn._execute_command(COM_STMT_PREPARE, (self.head + ",".join([self.row] * count)).encode())
        try:
            first = conn._read_packet().get_all_data()
        except Exception as exc:  # the server's error packet, raised by PyMySQL
            if conn.open and exc.args and exc.args[0] in CANNOT_PREPARE:
                raise CannotPrepare(str(exc)) from exc
            raise
        if first[:1] != b"\x00" or len(first) < 9:
            raise _protocol_error(conn, "unexpected reply to COM_STMT_PREPARE")
        stmt_id, columns, params = struct.unpack_from("<IHH", first, 1)
        # The definitions of its parameters and result columns, each list ended by an EOF
        # packet unless CLIENT_DEPRECATE_EOF: read without building a packet object for each
        # of a 1024-row statement's 9216 definitions.
        eof = 0 if capabilities & CLIENT_DEPRECATE_EOF else 1
        for n in (params, columns):
            if n:
                _skip_packets(conn, n + eof)
        self.statements[count] = stmt_id
        if params != count * self.row.count("?") or columns:
            raise _protocol_error(
                conn,
                f"a prepared INSERT of {count} rows has {params} "
                f"parameters and {columns} result columns",
            )
        return stmt_id

    def close(self) -> None:
        """Deallocate the statements (COM_STMT_CLOSE has no reply). A connection already lost
        has lost them with it."""
        statements, self.statements = self.statements, {}
        for stmt_id in statements.values():
            if not self.connection.open:
                return
            try:
                self.connection._execute_command(COM_STMT_CLOSE, struct.pack("<I", stmt_id))
            except Exception:  # the connection is gone: so are its statements
                return


def _skip_packets(conn, n: int) -> None:
    """Read n packets of under 16 MB that are not needed, checking their sequence numbers."""
    read = conn._read_bytes
    seq = conn._next_seq_id
    for _ in range(n):
        header = read(4)
        if header[3] != seq:
            raise _protocol_error(conn, f"packet sequence number {header[3]}, expected {seq}")
        seq = (seq + 1) % 256
        read(header[0] | header[1] << 8 | header[2] << 16)
    conn._next_seq_id = seq


def _protocol_error(conn, what: str) -> Exception:
    """A reply out of step with the protocol: the connection cannot be trusted any more."""
    from pymysql.err import OperationalError

    conn._force_close()
    return OperationalError(2027, f"malformed packet: {what}")
