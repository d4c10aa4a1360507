"""A transcript imported under one name, then hard-linked into another folder: an import run
that holds both names keeps its one session, whichever name it reads first (#32)."""

from __future__ import annotations

import json
import os

from ctxtool.transcripts.discover import fallback_source_id, hard_links, source_ids


def test_a_linked_file_is_found_through_its_name_in_another_folder_of_the_run(db, cli, tmp_path):
    first = tmp_path / "a" / "run.jsonl"
    first.parent.mkdir()
    first.write_bytes(b'{"role": "user", "content": "one"}\n')
    assert cli("--db", db.url, "import", first).exit_code == 0
    link = tmp_path / "b" / "run-link.jsonl"
    link.parent.mkdir()
    os.link(first, link)
    with first.open("ab") as out:
        out.write(b'{"role": "assistant", "content": "two"}\n')
    # The new name first: its folder holds no other name of the file, the run does.
    result = cli("--db", db.url, "import", "--json", link.parent, first.parent)
    assert result.exit_code == 0, result.output
    through_link, through_first = json.loads(result.stdout)
    assert (through_link["added"], through_link["present"]) == (1, 1)
    assert (through_first["added"], through_first["present"]) == (0, 2)
    assert through_link["session_id"] == through_first["session_id"]
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 1
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 2


def test_the_runs_names_of_an_inode_are_its_legacy_ids(tmp_path):
    one = tmp_path / "x" / "s.jsonl"
    one.parent.mkdir()
    one.write_text("{}\n")
    two = tmp_path / "y" / "t.jsonl"
    two.parent.mkdir()
    os.link(one, two)
    alone = tmp_path / "y" / "alone.jsonl"
    alone.write_text("{}\n")
    links = hard_links([str(one), str(two), str(alone), "-"])
    assert list(links.values()) == [[str(one), str(two)]]
    inode_id, legacy = source_ids(str(two), links=links)
    assert inode_id.startswith("linked@")
    assert legacy == (fallback_source_id(str(two)), fallback_source_id(str(one)))
    # Without the run's names only the folder's are known (y/ holds no other name of it).
    assert source_ids(str(two))[1] == (fallback_source_id(str(two)),)
