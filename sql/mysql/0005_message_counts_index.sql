-- The encoding a count was made with joins the index that already holds the count, and the
-- index on the encoding alone goes. Every reader of counts asks "counted, and with the encoding
-- this session needs?" per session: `tokens report`, `tokens count` finding what is left, the
-- compaction finder's sums. With the encoding beside the count, those answers come from this
-- one index without reading the rows (their content); (token_encoding, id) served none of them
-- (its order is not a session's), yet every insert and every count written paid for it, a
-- count by moving its entry.
-- One statement: the index is redefined under its own name (queries name it in hints).
ALTER TABLE agent_message
    DROP INDEX idx_message_session_id_tokens,
    ADD INDEX idx_message_session_id_tokens (session_id, id, token_count, token_encoding),
    DROP INDEX idx_message_token_encoding;
