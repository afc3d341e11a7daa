"""The input files: the stack file's schema and loading, image pins, SGLang parser snapshots, model configs.

Imports nothing at import time (``snapshot_argparse`` is copied into the stand-in image, stdlib only)."""
