-- The id of an assistant message's one tool call, in an index, so the server proves a
-- suffix's calls answered next (store.reads.calls_answered_next) from indexes alone. Before
-- it, the proof read each call's row for its JSON and the next message's row: on a 600k-message session whose rows do not fit the buffer pool, 3.5 s of the dry
-- run's and `sessions list --over-window`'s time (scripts/bench_bigstore.py).
-- call_id is a virtual column (computed by the server, never stored in the row; INVISIBLE, as
-- tool_call_count in 0009): the id as text where the message is the role 'assistant' (as
-- bytes: MySQL compares roles without case), tool_calls an array of one object whose "id" is a
-- JSON string, the key once in the text and no \u escape in it (the server reads a duplicate
-- key's first value and decodes escapes; Message, through orjson, its last), and the id fits
-- the column (a longer one is NULL here, never an error on the runtime's INSERT; the
-- backslash is CHAR(92): a literal one would read differently under NO_BACKSLASH_ESCAPES). NULL
-- otherwise: the proof then reads the pairing row by row, as any message it cannot vouch for.
ALTER TABLE agent_message
    ADD COLUMN call_id VARCHAR(191) AS (
        CASE WHEN CAST(role AS BINARY) = 'assistant'
              AND JSON_LENGTH(tool_calls) = 1
              AND LEFT(tool_calls, 1) = '['
              AND LENGTH(tool_calls) - LENGTH(REPLACE(tool_calls, '"id"', '')) = 4
              AND INSTR(tool_calls, CONCAT(CHAR(92 USING ascii), 'u')) = 0
              AND LEFT(JSON_EXTRACT(tool_calls, '$[0].id'), 1) = '"'
              AND CHAR_LENGTH(JSON_UNQUOTE(JSON_EXTRACT(tool_calls, '$[0].id'))) <= 191
             THEN JSON_UNQUOTE(JSON_EXTRACT(tool_calls, '$[0].id'))
        END
    ) VIRTUAL INVISIBLE;

-- An index of its own, not a column more in idx_message_session_id_tokens: that one grew
-- wider than uq_message_source (session_id, source_id), and MariaDB then read a session's
-- newest messages by walking the primary key from the table's end (a dry run's tail: 23 s
-- on 10M messages where it took 0.1 s). Narrow, it is the cheapest way to a session's
-- messages in id order for every query that does not name an index.
CREATE INDEX idx_message_call_id ON agent_message (session_id, id, call_id);
