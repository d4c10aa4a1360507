-- What ctxtool adds to the seed tables (see sql/mysql/0002 for what each column is for).
-- SQLite adds one column per ALTER TABLE.
ALTER TABLE agent_session ADD COLUMN model TEXT NULL;
ALTER TABLE agent_session ADD COLUMN system_prompt TEXT NULL;
ALTER TABLE agent_session ADD COLUMN source_format TEXT NULL;
ALTER TABLE agent_session ADD COLUMN source_id TEXT NULL;
ALTER TABLE agent_session ADD COLUMN details TEXT NULL;
ALTER TABLE agent_session ADD COLUMN lease_owner TEXT NULL;
ALTER TABLE agent_session ADD COLUMN lease_expires_at TEXT NULL;
CREATE UNIQUE INDEX uq_session_source ON agent_session (source_format, source_id);

ALTER TABLE agent_message ADD COLUMN tool_calls TEXT NULL;
ALTER TABLE agent_message ADD COLUMN tool_call_id TEXT NULL;
ALTER TABLE agent_message ADD COLUMN name TEXT NULL;
ALTER TABLE agent_message ADD COLUMN token_count INTEGER NULL;
ALTER TABLE agent_message ADD COLUMN token_encoding TEXT NULL;
ALTER TABLE agent_message ADD COLUMN source_id TEXT NULL;
ALTER TABLE agent_message ADD COLUMN details TEXT NULL;
CREATE INDEX idx_message_session_id_tokens ON agent_message (session_id, id, token_count);
CREATE UNIQUE INDEX uq_message_source ON agent_message (session_id, source_id);
CREATE INDEX idx_message_token_encoding ON agent_message (token_encoding, id);

ALTER TABLE agent_compaction ADD COLUMN parent_compaction_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_compaction ADD COLUMN summary_tokens INTEGER NULL;
ALTER TABLE agent_compaction ADD COLUMN tokens_after INTEGER NULL;
ALTER TABLE agent_compaction ADD COLUMN summarizer TEXT NULL;
ALTER TABLE agent_compaction ADD COLUMN summarizer_model TEXT NULL;
ALTER TABLE agent_compaction ADD COLUMN source_id TEXT NULL;
ALTER TABLE agent_compaction ADD COLUMN details TEXT NULL;

UPDATE agent_compaction
SET parent_compaction_id = COALESCE((
    SELECT MAX(parent.id) FROM agent_compaction parent
    WHERE parent.session_id = agent_compaction.session_id AND parent.id < agent_compaction.id
), 0);

CREATE UNIQUE INDEX uq_compaction_parent ON agent_compaction (session_id, parent_compaction_id);
CREATE UNIQUE INDEX uq_compaction_source ON agent_compaction (session_id, source_id);
CREATE INDEX idx_compaction_session_id ON agent_compaction (session_id, id);
