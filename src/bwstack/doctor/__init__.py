"""``bwstack doctor``: host preflight before the first ``bwstack up``.

:mod:`~bwstack.doctor.command` runs it (expectations, probing, the report); :mod:`~bwstack.doctor.probe` asks
the host (or a recorded one); :mod:`~bwstack.doctor.facts` holds the records and parsers;
:mod:`~bwstack.doctor.checks` judges, with the checks of :mod:`~bwstack.doctor.gpu`,
:mod:`~bwstack.doctor.container` and :mod:`~bwstack.doctor.host`. This file imports nothing.
"""
