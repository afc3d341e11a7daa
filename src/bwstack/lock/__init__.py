"""``bwstack lock``: everything that turns a variant's hand-written pins into locked, generated files.

Rooms: :mod:`~bwstack.lock.command` (the command: base digest, ``overrides.lock``, ``wheelhouse.lock``, the
checks every command runs on them), :mod:`~bwstack.lock.args` (``--args``: the parser snapshot
``sglang-args.json`` from the pinned SGLang) and :mod:`~bwstack.lock.kernel_facts` (``--kernel-facts``: which
GPU archs the pinned kernel wheels were built for).
"""
