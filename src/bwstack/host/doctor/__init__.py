"""``bwstack doctor``: host preflight before the first ``bwstack up``.

:mod:`~bwstack.host.doctor.command` runs it (expectations, probing, the report);
:mod:`~bwstack.host.doctor.probe` asks
the host (or a recorded one); :mod:`~bwstack.host.doctor.facts` holds the records and parsers;
:mod:`~bwstack.host.doctor.checks` judges, with the checks of :mod:`~bwstack.host.doctor.gpu`,
:mod:`~bwstack.host.doctor.container` and :mod:`~bwstack.host.doctor.host`. This file imports nothing.
"""
