-- The id of an assistant message's one tool call, in an index, so the server proves a
-- suffix's calls answered next (store.reads.calls_answered_next) from indexes alone. Before
-- it, the proof read each call's row for its JSON and the next message's row: on a
-- 600k-message session whose rows do not fit the buffer pool, 2-3.5 s of the dry run's and
-- `sessions list --over-window`'s time (scripts/bench_bigstore.py).
-- call_id is a virtual column (computed by the server, never stored in the row; INVISIBLE, as
-- tool_call_count in 0009), NULL wherever the server could read tool_calls otherwise than
-- ctxtool's records (orjson) do; the proof then reads the pairing row by row, as any message
-- it cannot vouch for. It is the id as text only where:
-- - the message is the role 'assistant' (as bytes: MySQL compares roles without case);
-- - tool_calls is an array of one object whose "id" is a JSON string, the key once in the text
--   and no \u escape in it (the server reads a duplicate key's first value and decodes escapes;
--   orjson, its last);
-- - the text is strict JSON token by token: its strings (with no escape but \" \\ \/ \b \f \n
--   \r \t) taken out, what is left is numbers as RFC 8259 writes them, true, false, null,
--   brackets, braces, colons, commas and JSON's four spaces. MariaDB's JSON column takes
--   "it\'s", 01, 1. or 1e, which orjson refuses (the record then holds no call at all);
-- - the id fits the column.
-- Never an error on a runtime's INSERT that 0009's tool_call_count does not already make: the
-- column is utf8mb4 whatever the table's charset (a 4-byte character in an id of a utf8mb3
-- table), a longer id is NULL. Backslashes are CHAR(92): a literal one reads differently under
-- NO_BACKSLASH_ESCAPES. REGEXP_REPLACE: MySQL 8.0.4, MariaDB 10.0.5.
ALTER TABLE agent_message
    ADD COLUMN call_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin AS (
        CASE WHEN CAST(role AS BINARY) = 'assistant'
              AND JSON_LENGTH(tool_calls) = 1
              AND LEFT(tool_calls, 1) = '['
              AND LENGTH(tool_calls) - LENGTH(REPLACE(tool_calls, '"id"', '')) = 4
              AND INSTR(tool_calls, CONCAT(CHAR(92 USING utf8mb4), _utf8mb4'u')) = 0
              AND LEFT(JSON_EXTRACT(tool_calls, '$[0].id'), 1) = '"'
              AND CHAR_LENGTH(JSON_UNQUOTE(JSON_EXTRACT(tool_calls, '$[0].id'))) <= 191
              AND REGEXP_REPLACE(
                    REGEXP_REPLACE(
                      CONVERT(tool_calls USING utf8mb4),
                      CONCAT(
                        _utf8mb4'(?-i)"(?:[^"', CHAR(92 USING utf8mb4), CHAR(92 USING utf8mb4),
                        _utf8mb4']|', CHAR(92 USING utf8mb4), CHAR(92 USING utf8mb4),
                        _utf8mb4'["', CHAR(92 USING utf8mb4), CHAR(92 USING utf8mb4),
                        _utf8mb4'/bfnrt])*"'
                      ),
                      _utf8mb4''
                    ),
                    CONCAT(
                      _utf8mb4'(?-i)-?(?:0|[1-9][0-9]*)(?:[.][0-9]+)?(?:[eE][-+]?[0-9]+)?',
                      _utf8mb4'(?![0-9.eE+-])|true|false|null|[{}:, ',
                      CHAR(9 USING utf8mb4), CHAR(10 USING utf8mb4), CHAR(13 USING utf8mb4),
                      _utf8mb4']|', CHAR(92 USING utf8mb4), _utf8mb4'[|',
                      CHAR(92 USING utf8mb4), _utf8mb4']'
                    ),
                    _utf8mb4''
                  ) = _utf8mb4''
             THEN JSON_UNQUOTE(JSON_EXTRACT(tool_calls, '$[0].id'))
        END
    ) VIRTUAL INVISIBLE;

-- An index of its own, not a column more in idx_message_session_id_tokens: that one grew
-- wider than uq_message_source (session_id, source_id), and MariaDB then read a session's
-- newest messages by walking the primary key from the table's end (a dry run's tail: 23 s
-- on 10M messages where it took 0.1 s). Narrow, it is the cheapest way to a session's
-- messages in id order for every query that does not name an index.
CREATE INDEX idx_message_call_id ON agent_message (session_id, id, call_id);
