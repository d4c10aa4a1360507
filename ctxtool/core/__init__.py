"""The rules: what a record, a restored context, a compaction plan, a checkpoint's quality and a
consistent store are. Plain functions over plain lists and dataclasses; no SQL, no network, no
click. Nothing here imports anything of ctxtool outside this package (``tests/test_layering.py``
checks it), and mypy checks every module here strictly."""
