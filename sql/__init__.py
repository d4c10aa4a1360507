"""Schema migrations, one directory per dialect, shipped inside the package as ``ctxtool.sql``."""
