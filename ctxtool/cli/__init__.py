"""The ``ctxtool`` command: a thin click layer over the library.

This package only assembles it: the root group (``root``) and one module per group of
commands, each adding its commands to the root. What every command is handed is ``app``, the
options several commands share are ``options``, the configuration file's defaults
``config_defaults``, the guarded standard streams ``streams``.
"""

from __future__ import annotations

import sys

try:
    # Each module adds its commands to `main` as it is imported.
    from . import (  # noqa: F401
        archive,
        compact,
        config,
        context,
        eval,
        imports,
        migrations,
        search,
        sessions,
        token_counts,
        validate,
    )
    from .root import main
except KeyboardInterrupt:
    # Ctrl-C in the second the modules take to load: the line and exit code it has later
    # (ctxtool.failures), not a traceback through the import machinery.
    sys.stderr.write("Error: interrupted\n")
    raise SystemExit(130) from None

__all__ = ["main"]
