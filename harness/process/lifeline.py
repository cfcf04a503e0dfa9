"""A lifeline: a child learns that its owner died, however the owner died.

The owner makes a pipe and keeps its write end; the child gets only the read
end and watches it. Nothing is ever written: when the owner dies -- SIGKILL
included, which no handler of the owner's can catch -- the kernel closes its
descriptors, and the child's read returns end of file. The watcher then sends
the child itself SIGTERM, so the child's own teardown (its job and run home,
see :func:`~harness.process.jobs.install_signal_handlers`) ends everything it
started, instead of carrying on as an orphan.

A pipe rather than ``prctl(PR_SET_PDEATHSIG)``: the parent-death signal fires
when the *thread* that forked the child exits, and the runner starts workers
from a thread pool; a pipe follows the process, works on every POSIX system,
and needs no code between fork and exec (which is unsafe in a threaded runner).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Mapping

ENV = "PEERWIRE_LIFELINE_FD"
"""Names the read end's descriptor number in the child's environment."""


class Lifeline:
    """The owner's side: create, hand :attr:`fd` to one child (``pass_fds``), then :meth:`handed_over`.

    Only the owner may hold the write end: it is created non-inheritable, and
    children started with ``close_fds`` (the default) never receive it.
    """

    def __init__(self) -> None:
        self.fd, self._write_end = os.pipe()
        os.set_inheritable(self.fd, True)

    def env(self) -> Mapping[str, str]:
        """What to add to the child's environment so it can find its end."""
        return {ENV: str(self.fd)}

    def handed_over(self) -> None:
        """The child holds its end now: drop the owner's copy of it. Idempotent."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def cut(self) -> None:
        """Close the write end: the child sees its owner gone. Idempotent."""
        self.handed_over()
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1


def watch(environ: Mapping[str, str] | None = None, *, sig: signal.Signals = signal.SIGTERM) -> bool:
    """In the child: watch the lifeline named in ``environ`` (default ``os.environ``).

    When the owner's end closes, send this process ``sig``. Returns whether a
    lifeline was found; without one (a child started by hand) nothing happens.
    """
    value = (os.environ if environ is None else environ).get(ENV)
    if not value:
        return False
    fd = int(value)
    os.set_inheritable(fd, False)  # this process's own children do not keep the owner alive in our eyes

    def wait_for_the_owner() -> None:
        while True:
            try:
                if os.read(fd, 1) == b"":
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os.kill(os.getpid(), sig)

    threading.Thread(target=wait_for_the_owner, name="lifeline", daemon=True).start()
    return True
