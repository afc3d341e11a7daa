"""Tiny models made here, for the CPU stacks and tests: a random one (``tinymodel``), a trained one
(``tinytrain``), the copying model and its windowed twin (``tinycopy``), and a CPU stack's tiny models made
before ``up``, ``fetch`` or a sweep (``ensure``). Floor 2: imports only the stack files."""
