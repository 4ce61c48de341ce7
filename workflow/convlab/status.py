"""Cell outcomes. A kernel's own failure becomes a row with a status; a pipeline bug is an exception."""

from __future__ import annotations

OK = "ok"
WRONG = "wrong"
INVALID_CONFIG = "invalid_config"
OOM = "oom"
UNSUPPORTED = "unsupported"
ERROR = "error"
STATUSES = (OK, WRONG, INVALID_CONFIG, OOM, UNSUPPORTED, ERROR)


class CellFailure(Exception):
    """The kernel under test failed in a way the row records (the sweep goes on). ``columns``:
    row columns the failing step found before it failed (e.g. the limit a launch exceeds)."""

    status = ERROR

    def __init__(self, reason: str, stage: str = "", columns: dict | None = None):
        super().__init__(reason)
        self.reason = reason
        self.stage = stage
        self.columns = dict(columns or {})


class LaunchConfigError(CellFailure):
    """The launch was refused (e.g. 64x64 = 4096 threads per block): nothing ran."""

    status = INVALID_CONFIG


class DeviceOutOfMemory(CellFailure):
    status = OOM


class UnsupportedCell(CellFailure):
    """The kernel does not implement this problem (e.g. a stride it has no code for)."""

    status = UNSUPPORTED


class KernelFailure(CellFailure):
    """The kernel failed to compile, or faulted while running."""

    status = ERROR


class UserError(Exception):
    """A mistake the user can fix (a config value, a missing picture, a damaged row): the command
    prints one `error:` line and exits 2, with no traceback."""


class ConfigError(UserError, ValueError):
    """A configuration mistake, reported with the key it concerns."""



class BackendUnavailable(UserError, RuntimeError):
    """The requested backend cannot run here (e.g. cuda without a GPU): a user error, not a row."""
