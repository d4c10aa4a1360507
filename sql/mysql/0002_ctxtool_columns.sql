-- What ctxtool adds to the seed tables. Every column is nullable or defaulted, so rows the agent
-- runtime keeps writing stay valid. ADD COLUMN at the end is instant on MySQL 8 and MariaDB 10.11.

-- Sessions: the model (to choose a context window and a token encoding), the system prompt that
-- heads the restored context, where the session came from (idempotent re-imports) and the
-- compaction lease that keeps two `compact --all` workers off the same session.
ALTER TABLE agent_session
    ADD COLUMN model            VARCHAR(191) NULL,
    ADD COLUMN system_prompt    MEDIUMTEXT   NULL,
    ADD COLUMN source_format    VARCHAR(32)  NULL,
    ADD COLUMN source_id        VARCHAR(191) NULL,
    ADD COLUMN details          JSON         NULL,
    ADD COLUMN lease_owner      VARCHAR(191) NULL,
    ADD COLUMN lease_expires_at DATETIME(6)  NULL;

CREATE UNIQUE INDEX uq_session_source ON agent_session (source_format, source_id);

-- Messages: OpenAI-style tool calls on assistant messages and tool_call_id on results, so a
-- restored context can be sent back to an API; the token count and the encoding it was counted
-- with; the id the message had in its transcript; everything else of the source record (usage,
-- model, thinking, raw type) in details.
ALTER TABLE agent_message
    ADD COLUMN tool_calls     JSON         NULL,
    ADD COLUMN tool_call_id   VARCHAR(191) NULL,
    ADD COLUMN name           VARCHAR(191) NULL,
    ADD COLUMN token_count    INT          NULL,
    ADD COLUMN token_encoding VARCHAR(32)  NULL,
    ADD COLUMN source_id      VARCHAR(191) NULL,
    ADD COLUMN details        JSON         NULL;

-- "Messages of a session from an id on, in order", with the token count in the index so that
-- summing an effective context never touches the rows.
CREATE INDEX idx_message_session_id_tokens ON agent_message (session_id, id, token_count);
CREATE UNIQUE INDEX uq_message_source ON agent_message (session_id, source_id);
-- Resumable `tokens count`: find messages not yet counted (or counted with another encoding).
CREATE INDEX idx_message_token_encoding ON agent_message (token_encoding, id);

-- Compactions: the parent checkpoint (0 for a session's first), unique per session, so two
-- compactors racing on one session cannot both append; who wrote it; tokens after; details such
-- as files read and modified.
ALTER TABLE agent_compaction
    ADD COLUMN parent_compaction_id BIGINT       NOT NULL DEFAULT 0,
    ADD COLUMN summary_tokens       INT          NULL,
    ADD COLUMN tokens_after         INT          NULL,
    ADD COLUMN summarizer           VARCHAR(64)  NULL,
    ADD COLUMN summarizer_model     VARCHAR(191) NULL,
    ADD COLUMN source_id            VARCHAR(191) NULL,
    ADD COLUMN details              JSON         NULL;

-- Checkpoints written before ctxtool (an adopted database) are chained in id order, so the
-- unique key below can be created over them.
UPDATE agent_compaction c
JOIN (
    SELECT child.id AS id, MAX(parent.id) AS parent_id
    FROM agent_compaction child
    JOIN agent_compaction parent
      ON parent.session_id = child.session_id AND parent.id < child.id
    GROUP BY child.id
) chain ON chain.id = c.id
SET c.parent_compaction_id = chain.parent_id;

CREATE UNIQUE INDEX uq_compaction_parent ON agent_compaction (session_id, parent_compaction_id);
CREATE UNIQUE INDEX uq_compaction_source ON agent_compaction (session_id, source_id);
-- Latest checkpoint of a session: ORDER BY id DESC LIMIT 1 on this index.
CREATE INDEX idx_compaction_session_id ON agent_compaction (session_id, id);
