"""``bwstack lock``: everything that turns a variant's hand-written pins into locked, generated files.

Rooms: :mod:`.command` (the command: base digest, ``overrides.lock``, ``wheelhouse.lock``, the
checks every command runs on them), `.args` (``--args``: the parser snapshot
``sglang-args.json`` from the pinned SGLang) and `.kernel_facts` (``--kernel-facts``: which
GPU archs the pinned kernel wheels were built for).
"""
