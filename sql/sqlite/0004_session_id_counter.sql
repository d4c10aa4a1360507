-- Where imports take new session ids from (see sql/mysql/0004 for the reasoning).
CREATE TABLE IF NOT EXISTS ctxtool_counters (
    name       TEXT    NOT NULL PRIMARY KEY,
    last_value INTEGER NOT NULL
);

INSERT OR IGNORE INTO ctxtool_counters (name, last_value)
SELECT 'agent_session.session_id', COALESCE(MAX(session_id), 0) FROM agent_session;
