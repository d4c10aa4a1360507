"""`migrate status` fits an 80-column terminal (it was 105 wide): names and details are
shortened, --json keeps every field whole."""

from __future__ import annotations

import json

import sqlalchemy as sa

from ctxtool.db.schema import schema_history

LONG = "a_migration_name_much_longer_than_any_shipped_one_" * 2


def test_migrate_status_fits_80_columns_and_json_keeps_it_whole(sqlite_db, cli):
    with sqlite_db.engine.begin() as conn:  # a version this ctxtool does not ship
        conn.execute(
            sa.insert(schema_history).values(
                version="0099",
                name=LONG,
                checksum="f" * 64,
                status="applied",
                started_at=sa.func.current_timestamp(),
                applied_at=sa.func.current_timestamp(),
                duration_ms=12,
            )
        )
    result = cli("--db", sqlite_db.url, "migrate", "status", env={"COLUMNS": "80"})
    assert result.exit_code == 3  # a recorded version that is not shipped
    lines = result.output.splitlines()
    shown = [line for line in lines if not line.startswith("Error: ")]
    assert max(len(line) for line in shown) <= 80, result.output
    assert lines[0].startswith("database: …") and lines[0].endswith("/ctx.db (sqlite)")
    assert any(line.startswith("0001") and "seed_tables" in line for line in lines)
    assert any(line.startswith("0099") and "…" in line for line in lines)
    whole = json.loads(cli("--db", sqlite_db.url, "migrate", "status", "--json").stdout)
    row = next(r for r in whole if r["version"] == "0099")
    assert row["name"] == LONG and row["checksum"] == "f" * 12
    assert row["detail"] == "recorded here but not shipped with this ctxtool"
    wide = cli("--db", sqlite_db.url, "migrate", "status", env={"COLUMNS": "200"})
    assert LONG in wide.output and "recorded here but not shipped" in wide.output
