-- The encoding a count was made with joins the index that holds the count (see sql/mysql/0005).
DROP INDEX IF EXISTS idx_message_token_encoding;
DROP INDEX IF EXISTS idx_message_session_id_tokens;
CREATE INDEX idx_message_session_id_tokens ON agent_message (session_id, id, token_count, token_encoding);
