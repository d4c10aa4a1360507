"""ctxtool's own archive JSONL (``ctxtool sessions archive``): a session as the store held it.

One ``ctxtool_session`` line (the session's source format and id, title, model, system prompt,
user and project), then its messages in id order (``ctxtool_message``), then its checkpoints
in id order (``ctxtool_checkpoint``, each naming its first kept message by source id, or none
when it kept nothing: details.kept_after_message).
Importing it gives back the session under its own source format and id, so re-importing the
transcript it came from afterwards finds it, as before the archive.
"""

from __future__ import annotations

from ..core.records import KEPT_AFTER_MESSAGE
from ..core.source_records import InvalidRecord, Line, Record, SourceCompaction, SourceMessage
from . import fields as f
from .walk import FormatParser

SESSION, MESSAGE, CHECKPOINT = "ctxtool_session", "ctxtool_message", "ctxtool_checkpoint"
# The details key of a checkpoint record holding the columns that say who wrote it, and under
# it the checkpoint's details where they are no JSON object (a runtime wrote text, a list).
ARCHIVED = "archived"
ARCHIVED_DETAILS = "details"
_ROLES = ("system", "user", "assistant", "tool")


class CtxtoolArchiveParser(FormatParser):
    name = "ctxtool-archive"
    titled_by_request = False  # the archive says what the title was, none included

    @staticmethod
    def fits(obj: dict) -> bool:
        return obj.get("type") in (SESSION, MESSAGE, CHECKPOINT)

    def _session(self, line: Line) -> None:
        rec, session = line.obj, self.session
        session.source_format = _needed(f.name(rec, "source_format"), "source_format")
        session.source_id = _needed(f.identifier(rec, "source_id"), "source_id")
        session.title = f.string(rec, "title")
        session.model = f.name(rec, "model")
        session.system_prompt = f.string(rec, "system_prompt")
        session.user_id = f.string(rec, "user_id")
        session.project_id = f.string(rec, "project_id")
        session.created_at = f.parse_time(rec.get("created_at"))
        session.details.update(f.obj(rec, "details") or {})

    def _message(self, line: Line) -> list[Record]:
        rec = line.obj
        role = rec.get("role")
        if role not in _ROLES:
            raise InvalidRecord(f"role must be one of {', '.join(_ROLES)}")
        calls = rec.get("tool_calls")
        if calls is not None and not (
            isinstance(calls, list) and all(isinstance(c, dict) for c in calls)
        ):
            raise InvalidRecord("'tool_calls' must be a list of objects")
        return [
            SourceMessage(
                self.ids(_needed(f.identifier(rec, "source_id"), "source_id"), line.number),
                role,
                f.string(rec, "content"),
                line.number,
                tool_calls=calls or None,
                tool_call_id=f.identifier(rec, "tool_call_id"),
                name=f.name(rec, "name"),
                created_at=self.time(rec.get("created_at")),
                details=f.obj(rec, "details") or None,
            )
        ]

    def _checkpoint(self, line: Line) -> list[Record]:
        rec = line.obj
        details = dict(f.obj(rec, "details") or {})
        # The columns the archive keeps under details.archived (archive.checkpoint_record) go
        # back to their columns: the checkpoint is the one that was archived, not an import.
        made_by = details.pop(ARCHIVED, None)
        made_by = made_by if isinstance(made_by, dict) else {}
        if ARCHIVED_DETAILS in made_by and not details:
            details = made_by[ARCHIVED_DETAILS]  # no JSON object: back as it was
        return [
            SourceCompaction(
                self.ids(_needed(f.identifier(rec, "source_id"), "source_id"), line.number),
                _needed(f.string(rec, "summary"), "summary"),
                line.number,
                first_kept_source_id=_first_kept(rec, details if isinstance(details, dict) else {}),
                tokens_before=f.token_count(rec.get("tokens_before")),
                details=details or None,
                created_at=self.time(rec.get("created_at")),
                summarizer=f.name(made_by, "summarizer"),
                summarizer_model=f.name(made_by, "summarizer_model"),
                summary_tokens=f.token_count(made_by.get("summary_tokens")),
                tokens_after=f.token_count(made_by.get("tokens_after")),
            )
        ]

    handlers = {SESSION: _session, MESSAGE: _message, CHECKPOINT: _checkpoint}


def says_kept_nothing(details: object) -> bool:
    """Whether a checkpoint record's details say it kept nothing: details.kept_after_message
    is a message id (an integer, never a boolean), what lets it name no first kept message."""
    after = details.get(KEPT_AFTER_MESSAGE) if isinstance(details, dict) else None
    return type(after) is int


def _first_kept(rec: dict, details: dict) -> str | None:
    """The source id of the first message the checkpoint keeps; None (null or absent) only
    for a checkpoint that says it kept nothing (details.kept_after_message, an id): the import
    then writes its cut after the session's last message, as for a compaction ending a
    transcript."""
    if rec.get("first_kept_source_id") is None and says_kept_nothing(details):
        return None
    first_kept = f.identifier(rec, "first_kept_source_id")
    if not first_kept:
        raise InvalidRecord(
            "'first_kept_source_id' is missing, and details.kept_after_message does not say "
            "the checkpoint kept nothing"
        )
    return first_kept


def _needed(value, key: str):
    if not value:
        raise InvalidRecord(f"{key!r} is missing")
    return value
