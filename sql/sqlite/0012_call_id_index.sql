-- The id of an assistant message's one tool call, in an index of its own, so the pairing proof
-- reads indexes alone (see sql/mysql/0012): NULL wherever SQLite's json functions could read
-- tool_calls otherwise than ctxtool's records (orjson) do. Nested: SQLite's json functions fail
-- on text that is not JSON (the runtime's INSERT would fail with them), and AND may evaluate
-- either side first. json_valid is RFC 8259 only, as orjson reads it, but for two things: text
-- after a NUL (the json functions stop at it; orjson refuses the whole) and nesting deeper than
-- orjson's 1024 (SQLite before 3.45 took 2000): no NUL byte, at most 1000 brackets and braces.
ALTER TABLE agent_message ADD COLUMN call_id TEXT GENERATED ALWAYS AS (
    CASE WHEN role = 'assistant'
              AND instr(CAST(tool_calls AS BLOB), x'00') = 0
              AND json_valid(tool_calls) THEN
        CASE WHEN json_type(tool_calls) = 'array'
              AND json_array_length(tool_calls) = 1
              AND json_type(tool_calls, '$[0].id') = 'text'
              AND length(tool_calls) - length(replace(tool_calls, '"id"', '')) = 4
              AND instr(tool_calls, '\u') = 0
              AND length(tool_calls) - length(replace(replace(tool_calls, '[', ''), '{', ''))
                  <= 1000
             THEN json_extract(tool_calls, '$[0].id')
        END
    END
) VIRTUAL;
CREATE INDEX idx_message_call_id ON agent_message (session_id, id, call_id);
