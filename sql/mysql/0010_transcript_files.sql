-- The files transcripts without a session id of their own (OpenAI chat files) were imported
-- from, by inode: such a transcript's source id is taken from its path (or, once it has several
-- hard links, from its inode), so a name given to the file after its first import, in another
-- folder, imported in a later run, would otherwise be a new session. An import that finds no
-- session under any of the file's ids looks its (device, inode) up here and accepts the row only
-- if the file still begins with the bytes hashed in it (a reused inode holds another file), then
-- continues the session stored under source_id (and moves it to the file's current id).
-- device, inode: the file's st_dev and st_ino, as signed 64-bit (a value of 2^63 or more is
-- stored less 2^64). head_bytes: how many of the file's first bytes head_sha256 (hex) hashes: up
-- to 4 KiB, fewer while the file was shorter (a live transcript only grows, so its head stays).
-- A row is written in the import's own transaction, so it commits with the session or not at all.
CREATE TABLE IF NOT EXISTS ctxtool_transcript_files (
    device        BIGINT       NOT NULL,
    inode         BIGINT       NOT NULL,
    head_bytes    INT          NOT NULL,
    head_sha256   CHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    source_format VARCHAR(32)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    source_id     VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (device, inode)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
