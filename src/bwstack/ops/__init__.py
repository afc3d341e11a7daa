"""The operator's commands, one floor under the command line: ``up``/``down`` (``updown``), ``up``
without a profile (``choose``), ``bwstack list`` (``listing``) and ``bwstack upgrade`` (``upgrade``,
``upgrade_render``). Floor 7: they may use every room below (the sweep's soak, the image build, the knowledge,
this host); nothing below imports them.
"""
