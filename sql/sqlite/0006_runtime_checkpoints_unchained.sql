-- parent_compaction_id becomes NULL by default (see sql/mysql/0006 for why). SQLite cannot
-- change a column's constraint in place: the table is rebuilt, in this file's transaction,
-- keeping every row, its id and the AUTOINCREMENT sequence (ids are never reused). The copy
-- takes the columns by position: a table with columns ctxtool does not know (a runtime's own)
-- fails here, whole, rather than lose them.
CREATE TABLE agent_compaction_rebuilt (
    id                    INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    session_id            INTEGER NOT NULL,
    summary               TEXT    NOT NULL,
    first_kept_message_id INTEGER NOT NULL,
    tokens_before         INTEGER NULL,
    created_at            TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    parent_compaction_id  INTEGER NULL DEFAULT NULL,
    summary_tokens        INTEGER NULL,
    tokens_after          INTEGER NULL,
    summarizer            TEXT    NULL,
    summarizer_model      TEXT    NULL,
    source_id             TEXT    NULL,
    details               TEXT    NULL
);

INSERT INTO agent_compaction_rebuilt SELECT * FROM agent_compaction;

INSERT INTO sqlite_sequence (name, seq)
SELECT 'agent_compaction_rebuilt', 0
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'agent_compaction_rebuilt');

UPDATE sqlite_sequence
SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'agent_compaction'), 0))
WHERE name = 'agent_compaction_rebuilt';

DROP TABLE agent_compaction;

ALTER TABLE agent_compaction_rebuilt RENAME TO agent_compaction;

CREATE UNIQUE INDEX uq_compaction_parent ON agent_compaction (session_id, parent_compaction_id);
CREATE UNIQUE INDEX uq_compaction_source ON agent_compaction (session_id, source_id);
CREATE INDEX idx_compaction_session_id ON agent_compaction (session_id, id);
