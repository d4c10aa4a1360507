-- Where imports take new session ids from. An import writes its session row in the same
-- transaction as the messages, so a failed or killed import leaves no row behind; the id is
-- taken before that transaction, in a tiny one of its own that commits at once, so concurrent
-- first imports never wait for each other's whole import. `last_value` is the last id handed
-- out; ctxtool takes the larger of it and the highest session_id stored (ids a runtime wrote)
-- plus one, so an id is never handed out twice, not even the id of a failed import.
CREATE TABLE IF NOT EXISTS ctxtool_counters (
    name       VARCHAR(64) NOT NULL,
    last_value BIGINT      NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- IGNORE: a run killed after this statement and resumed runs it again.
INSERT IGNORE INTO ctxtool_counters (name, last_value)
SELECT 'agent_session.session_id', COALESCE(MAX(session_id), 0) FROM agent_session;
