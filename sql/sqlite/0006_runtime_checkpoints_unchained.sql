-- parent_compaction_id becomes NULL by default (see sql/mysql/0006 for why). SQLite cannot
-- change a column's constraint with ALTER TABLE; its documented way for dropping a NOT NULL or
-- changing a default, which leave the stored rows as they are, is to edit the table's CREATE
-- statement in sqlite_master. Unlike rebuilding the table, that keeps everything else as it is:
-- the column order of a runtime's table, columns of its own, its indexes, triggers and views.
-- All in this file's transaction: a failure leaves the table as it was.
PRAGMA writable_schema = ON;

UPDATE sqlite_master
SET sql = replace(sql, 'parent_compaction_id INTEGER NOT NULL DEFAULT 0',
                  'parent_compaction_id INTEGER NULL DEFAULT NULL')
WHERE type = 'table' AND name = 'agent_compaction';

-- This connection reads the edited schema from here on.
PRAGMA writable_schema = RESET;

-- The column must now default to NULL: a definition 0002 did not write (the edit above found
-- nothing to replace) fails here, on this NOT NULL, and the file rolls back.
CREATE TEMP TABLE ctxtool_0006_check (parent_compaction_id_defaults_to_null INTEGER NOT NULL);

INSERT INTO ctxtool_0006_check
SELECT CASE WHEN "notnull" = 0 AND coalesce(upper(dflt_value), 'NULL') = 'NULL' THEN 1 END
FROM pragma_table_info('agent_compaction') WHERE name = 'parent_compaction_id';

DROP TABLE ctxtool_0006_check;

-- A schema change bumps the schema version, so every connection already open (a runtime's)
-- reads the table afresh before its next statement.
DROP INDEX uq_compaction_parent;

CREATE UNIQUE INDEX uq_compaction_parent ON agent_compaction (session_id, parent_compaction_id);
