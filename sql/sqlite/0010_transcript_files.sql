-- The files transcripts without a session id of their own were imported from, by inode (see
-- sql/mysql/0010 for the reasoning).
CREATE TABLE IF NOT EXISTS ctxtool_transcript_files (
    device        INTEGER NOT NULL,
    inode         INTEGER NOT NULL,
    head_bytes    INTEGER NOT NULL,
    head_sha256   TEXT    NOT NULL,
    source_format TEXT    NOT NULL,
    source_id     TEXT    NOT NULL,
    PRIMARY KEY (device, inode)
);
