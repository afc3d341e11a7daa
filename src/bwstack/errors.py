"""User-facing errors: bad input is reported as one line naming file, line and field, with exit status 2."""

from __future__ import annotations

from pathlib import Path

EXIT_USAGE = 2


class UserError(Exception):
    """Bad input the user can fix: printed as ``bwstack: file:line: field: message`` and exit status 2."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field

    def render(self) -> str:
        """The one-line form shown to the user (without the ``bwstack:`` prefix)."""
        where = ""
        if self.file is not None:
            where = self.file if self.line is None else f"{self.file}:{self.line}"
        parts = [p for p in (where, self.field) if p]
        text = " ".join(self.message.split())  # one line, whatever the message carried
        return ": ".join([*parts, text])

    def __str__(self) -> str:
        return self.render()


class ExternalError(Exception):
    """A tool or service bwstack depends on failed (Docker, Compose, a registry); exit status 1, one line."""

    #: the command leaves worker threads it cannot stop (a library's download pool stuck in a read): the CLI
    #: ends the process after printing the line instead of waiting for them at interpreter exit
    abandons_threads = False


class AbandonedWork(ExternalError):
    """An ExternalError whose command stops waiting for work it cannot interrupt (see abandons_threads)."""

    abandons_threads = True
