"""Ctrl-C while the command's modules still load (its first second) is one line and exit
130, as it is later; it printed a KeyboardInterrupt traceback of twenty lines."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("ctxtool")


@pytest.mark.parametrize(
    "entry", [[str(SCRIPT)], [sys.executable, "-m", "ctxtool"]], ids=["script", "module"]
)
def test_ctrl_c_while_modules_load_is_one_line_and_exit_130(entry, tmp_path):
    interrupted = 0
    for delay in (0.2, 0.3, 0.45, 0.6, 0.8):
        proc = subprocess.Popen(
            [*entry, "compact", "--all", "--db", str(tmp_path / "missing.db")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            interrupted += 1
        out, err = proc.communicate(timeout=60)
        if proc.returncode == 3 or "does not exist" in err:  # it ran to its end first
            continue
        if "<frozen site>" in err:  # Python's own start (site's .pth files), before any ctxtool
            continue
        assert "Traceback" not in err, (delay, err)
        # 130, or killed by the signal itself when it lands in the interpreter's shutdown
        # (the shell shows both as 130)
        assert proc.returncode in (130, -signal.SIGINT), (delay, proc.returncode, err)
        assert len(err.strip().splitlines()) == 1, (delay, err)
    assert interrupted >= 2  # the signals came while the modules loaded
