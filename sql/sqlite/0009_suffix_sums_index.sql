-- The role, the number of tool calls and the call id a result answers join the index that
-- holds the counts, so the sums over restored suffixes read that index alone (see
-- sql/mysql/0009). What is not JSON holds no calls (as Message.calls reads it): SQLite does
-- not check the column, and json_array_length would fail the runtime's INSERT on it.
ALTER TABLE agent_message ADD COLUMN tool_call_count INTEGER GENERATED ALWAYS AS (
    CASE WHEN json_valid(tool_calls) THEN json_array_length(tool_calls) END
) VIRTUAL;
DROP INDEX IF EXISTS idx_message_session_id_tokens;
CREATE INDEX idx_message_session_id_tokens ON agent_message
    (session_id, id, token_count, token_encoding, role, tool_call_count, tool_call_id);
