-- Everything `compact --all` and `sessions list --over-window` sum over the restored suffixes
-- joins the index that holds the counts: the role (results, messages of no chat role), the
-- number of tool calls (a virtual column: JSON_LENGTH of tool_calls, computed by the server,
-- never stored in the row; INVISIBLE, so `SELECT *` and a runtime's INSERT without a column
-- list see the table as it was: MySQL 8.0.23+, MariaDB 10.3.3+) and the call id a result
-- answers. The sums then read that index alone. Without them every index entry was followed
-- by a read of its row: on 10M messages, whose rows do not fit the buffer pool, 432 s where
-- the index alone takes 15 s (scripts/bench_bigstore.py).
-- ADD COLUMN ... VIRTUAL changes no row (instant); the index is rebuilt online under its own
-- name (queries name it in hints), in one statement.
ALTER TABLE agent_message
    ADD COLUMN tool_call_count INT AS (JSON_LENGTH(tool_calls)) VIRTUAL INVISIBLE;

ALTER TABLE agent_message
    DROP INDEX idx_message_session_id_tokens,
    ADD INDEX idx_message_session_id_tokens
        (session_id, id, token_count, token_encoding, role, tool_call_count, tool_call_id);
