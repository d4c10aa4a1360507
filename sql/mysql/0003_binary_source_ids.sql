-- Source ids are keys from other programs (a Claude Code uuid, a message id, a file name): two
-- that differ only in case ("Msg-1", "msg-1"; "Chat.jsonl", "chat.jsonl") are two transcripts or
-- two messages. The seed tables' utf8mb4_unicode_ci made them equal, so the unique keys refused
-- the second (or merged two transcripts into one session). utf8mb4_bin compares them byte for
-- byte on MySQL 8 and MariaDB 10.11 alike (it still pads with spaces, so ctxtool never stores an
-- id that ends in a space; see ctxtool.transcripts.fields.source_key).
-- MODIFY keeps the indexes and rebuilds each table once; re-running it changes nothing.
ALTER TABLE agent_session
    MODIFY source_format VARCHAR(32)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    MODIFY source_id     VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;

ALTER TABLE agent_message
    MODIFY source_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;

ALTER TABLE agent_compaction
    MODIFY source_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
