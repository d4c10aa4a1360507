-- Each session's restored-suffix sums as `compact --all` last summed them (see
-- sql/mysql/0011 for the reasoning).
CREATE TABLE IF NOT EXISTS ctxtool_context_sums (
    session_id         INTEGER NOT NULL PRIMARY KEY,
    version            INTEGER NOT NULL,
    checkpoint_id      INTEGER NOT NULL,
    token_encoding     TEXT    NOT NULL,
    through_message_id INTEGER NOT NULL,
    messages           INTEGER NOT NULL,
    tokens             INTEGER NOT NULL,
    uncounted          INTEGER NOT NULL,
    calls              INTEGER NOT NULL,
    results            INTEGER NOT NULL,
    foreign_roles      INTEGER NOT NULL,
    longest_result_id  INTEGER NOT NULL,
    paired_through     INTEGER NULL
);
