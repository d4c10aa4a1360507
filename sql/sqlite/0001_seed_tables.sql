-- The three tables agent runtimes already write (see sql/mysql/0001 for the reasoning).
-- Times are UTC text with microseconds, which sorts and compares like MySQL's DATETIME(6).
CREATE TABLE IF NOT EXISTS agent_session (
    session_id  INTEGER NOT NULL PRIMARY KEY,
    user_id     TEXT    NULL,
    project_id  TEXT    NULL,
    title       TEXT    NULL,
    created_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

CREATE TABLE IF NOT EXISTS agent_message (
    id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    session_id  INTEGER NOT NULL,
    role        TEXT    NOT NULL,
    content     TEXT    NULL,
    created_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

CREATE TABLE IF NOT EXISTS agent_compaction (
    id                    INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    session_id            INTEGER NOT NULL,
    summary               TEXT    NOT NULL,
    first_kept_message_id INTEGER NOT NULL,
    tokens_before         INTEGER NULL,
    created_at            TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
