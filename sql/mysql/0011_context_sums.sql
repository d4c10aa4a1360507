-- Each session's restored-suffix sums as `compact --all` last summed them (store.context_sums):
-- the rows over the session's suffix from the cut of checkpoint checkpoint_id (0: none), through
-- message through_message_id, with counts made with token_encoding. A later run adds only the
-- messages written since (ids above through_message_id: one dive of the message index per
-- session) instead of walking all 10M entries of the index. A row is a cache: it is current
-- only while the session's latest checkpoint and the encoding it needs are those it names;
-- anything else, or no row, and the session is summed from its messages as before. version
-- goes up at every write: a row is replaced only if it is still the one that was read (a
-- `tokens count` that recounted the session in between marks it, and wins). paired_through:
-- the newest message id through which the server proved every tool call of the suffix answered
-- by the message after it (store.reads.calls_answered_next), so the sums are exact without
-- reading the rows again; NULL: not proved.
CREATE TABLE IF NOT EXISTS ctxtool_context_sums (
    session_id         BIGINT      NOT NULL,
    version            BIGINT      NOT NULL,
    checkpoint_id      BIGINT      NOT NULL,
    token_encoding     VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    through_message_id BIGINT      NOT NULL,
    messages           BIGINT      NOT NULL,
    tokens             BIGINT      NOT NULL,
    uncounted          BIGINT      NOT NULL,
    calls              BIGINT      NOT NULL,
    results            BIGINT      NOT NULL,
    foreign_roles      BIGINT      NOT NULL,
    longest_result_id  BIGINT      NOT NULL,
    paired_through     BIGINT      NULL,
    PRIMARY KEY (session_id)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;
