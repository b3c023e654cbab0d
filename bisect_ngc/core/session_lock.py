"""One question's sessions, driven by one process at a time."""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ..errors import UserError
from .store import ensure_state_dir


class SessionLock:
    """An exclusive lock on one question's sessions (`key`: the session key), released by
    the kernel if the holder dies. Bisections of other repositories or ranges take
    other locks, so several run at once on one state directory; the same question
    started twice is refused, naming the process that runs it."""

    def __init__(self, root: Path, key: str, session: str = ""):
        self.path = Path(root) / "locks" / f"{key}.lock"
        self.session = session or key
        self.fd: int | None = None

    def __enter__(self) -> "SessionLock":
        ensure_state_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        for attempt in range(20):       # `status` looks at the lock for an instant (held)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 19:           # a second's wait: a holder that stays holds it
                    pid, _, sid = os.pread(fd, 256, 0).decode(errors="replace").strip() \
                        .partition(" ")
                    os.close(fd)
                    raise UserError(f"this bisection is already running in pid "
                                    f"{pid or 'another process'} (session {sid or self.session})",
                                    hint="wait for it to finish, or stop it (Ctrl-C, or kill "
                                         "that pid) and run the same command to resume it; "
                                         "`bisect-ngc status` shows it") from None
                time.sleep(0.05)
            except OSError as exc:
                os.close(fd)
                raise UserError(f"cannot lock {self.path}: {exc.strerror} (a network "
                                f"filesystem without locks?)",
                                hint="mount it with locking (Lustre: -o flock), or pass "
                                     "--state on a local disk") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.session}".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)
            self.fd = None

    @staticmethod
    def held(root: Path, key: str) -> bool:
        """Whether a live process runs this question's session now."""
        try:
            fd = os.open(Path(root) / "locks" / f"{key}.lock", os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
