"""ctxtool: operations toolkit for the MySQL context stores of LLM agents.

The library modules do the work (``ctxtool.db``, ``ctxtool.migrate``, ``ctxtool.store``,
``ctxtool.core.tokens``, ``ctxtool.compaction``, ...); ``ctxtool.cli`` only parses and prints.
"""

__version__ = "0.1.0"
