"""ctxtool.failures: every exception as one line and an exit code, without credentials."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ctxtool.core.errors import CtxtoolError, PartialFailure, SchemaNotCurrent
from ctxtool.failures import FailureLine, describe_failure

SECRET = "s3cr3tPw"
URL = f"mysql+pymysql://root:{SECRET}@127.0.0.1:1/x"


def _raised(exc: BaseException) -> BaseException:
    """``exc`` as it arrives in an ``except`` clause: with its traceback."""
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001
        return caught


def test_a_ctxtool_error_keeps_its_message_and_its_exit_code():
    assert describe_failure(CtxtoolError("no session 7")) == FailureLine("no session 7", 1)
    assert describe_failure(SchemaNotCurrent("run migrate up")).exit_code == 3
    assert describe_failure(PartialFailure("2 of 5 failed")).exit_code == 4
    assert describe_failure(CtxtoolError("bad", exit_code=2)).exit_code == 2


def test_a_ctxtool_error_that_echoes_a_password_is_scrubbed():
    failure = describe_failure(CtxtoolError(f"cannot reach {URL}"), url=URL)
    assert SECRET not in failure.message and "***" in failure.message


def test_a_real_database_error_names_the_masked_url_and_never_the_password():
    engine = sa.create_engine(URL, connect_args={"connect_timeout": 2})
    try:
        with pytest.raises(sa.exc.OperationalError) as raised:
            engine.connect()
    finally:
        engine.dispose()
    failure = describe_failure(raised.value, url=URL)
    assert failure.exit_code == 1
    assert failure.message.startswith("database error at mysql+pymysql://root:***@127.0.0.1:1/x")
    assert SECRET not in failure.message
    # a batch item names its file first; without a URL the database is not named
    bare = describe_failure(raised.value, where="a.jsonl")
    assert bare.message.startswith("a.jsonl: database error: ")


def test_driver_text_that_holds_a_password_is_scrubbed():
    exc = sa.exc.OperationalError("SELECT 1", {}, Exception(f"login root:{SECRET} refused"))
    failure = describe_failure(exc, url=URL)
    assert SECRET not in failure.message and "***" in failure.message


def test_a_file_the_system_refused_is_named_with_its_reason(tmp_path):
    missing = tmp_path / "gone.jsonl"
    with pytest.raises(OSError) as raised:
        missing.open()
    assert describe_failure(raised.value) == FailureLine(f"{missing}: no such file or directory", 1)
    assert describe_failure(raised.value, where="<stdin>").message == (
        "<stdin>: no such file or directory"
    )


def test_a_bug_is_said_as_one_line_and_raised_under_ctxtool_debug(monkeypatch):
    monkeypatch.delenv("CTXTOOL_DEBUG", raising=False)
    bug = _raised(ValueError("bad value\nsecond line"))
    failure = describe_failure(bug, where="a.jsonl")
    assert failure.exit_code == 1
    assert failure.message.startswith("a.jsonl: internal error: ValueError: bad value — ")
    assert "CTXTOOL_DEBUG=1" in failure.message and "\n" not in failure.message
    monkeypatch.setenv("CTXTOOL_DEBUG", "1")
    with pytest.raises(ValueError) as raised:
        describe_failure(bug)
    assert raised.value is bug and raised.traceback  # the original, with its traceback
    # a user's error is never a bug, debug or not
    assert describe_failure(CtxtoolError("no session 7")).message == "no session 7"


def test_a_bug_that_echoes_a_summarizers_base_url_is_scrubbed(monkeypatch):
    monkeypatch.delenv("CTXTOOL_DEBUG", raising=False)
    base_url = f"https://user:{SECRET}@llm.example/v1"
    failure = describe_failure(
        RuntimeError(f"POST {base_url}/chat failed"), url=URL, secrets=[base_url, None]
    )
    assert SECRET not in failure.message and "internal error: RuntimeError" in failure.message


def test_an_interruption_is_exit_code_130():
    assert describe_failure(KeyboardInterrupt()) == FailureLine("interrupted", 130)
