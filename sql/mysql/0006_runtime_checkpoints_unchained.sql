-- A runtime that knows only the seed columns can keep appending checkpoints after adoption.
-- 0002 made parent_compaction_id NOT NULL DEFAULT 0 under UNIQUE (session_id,
-- parent_compaction_id): every checkpoint such a runtime inserted took parent 0, so its second
-- one for a session (or its first after ctxtool compacted the session) failed on that key, in
-- the runtime. NULL is now the default: a checkpoint with no recorded parent follows the one
-- before it by id, and NULLs never collide in a unique key. ctxtool still writes the parent of
-- every checkpoint it appends (0 for a session's first), so two compactors racing on one
-- session still cannot both append.
ALTER TABLE agent_compaction MODIFY parent_compaction_id BIGINT NULL DEFAULT NULL;
