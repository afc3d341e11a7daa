"""The image build: everything between a variant's pins and a serving image on this host.

Rooms: ``lock/`` (``bwstack lock``: digests, overrides.lock, wheelhouse.lock, parser snapshots, kernel
facts, ``lock --check``, ``variant new``), ``dockerbuild`` (``bwstack build``: the ``docker build`` argv with
every pin as a build arg, the CPU variant's preparation, the build-stage cache), ``cpubase`` (a CPU variant's
local base), ``rootfs`` (the registry-free Debian root file system under it) and ``standin_image`` (the
stand-in's images). Floor 5: above ``host`` (this machine) and ``know``, under the sweep and the operator's
commands.
"""
