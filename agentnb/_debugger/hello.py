"""A page's hello, answered once: which hellos the debugger answers with every row, and what it says back.

A page (``widgets/debugger.js``) says hello when it opens the widget, and again every 1.5 s until the kernel
answers, because a hello sent while the page's comms come up can be lost (a reopened notebook's widget then
waits for its rows forever). A kernel busy with the cell that displayed the widget receives those hellos all
at once when the cell ends; each would send every row again. So each hello names its page, and
:class:`Hellos` answers a repeated one (``retry``) only if that page was never answered, or was last answered
:attr:`Hellos.AGAIN_AFTER` seconds before: a burst of queued hellos sends the rows once, and a page whose answer
was lost on its way (it keeps saying hello, never welcomed) gets it again at its next hello after that.
A hello that names no page, or says it is not a repeat (the page found a gap in its rows), is always answered.
After the rows, the debugger sends :func:`welcome`, and the page stops saying hello.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class Hellos:
    """The pages this debugger answered (the last :attr:`KEPT` of them).

    Example:
        >>> hellos = Hellos()
        >>> [hellos.wanted({"kind": "hello", "page": "p", "retry": r}) for r in (False, True, True)]
        [True, False, False]
        >>> hellos.wanted({"kind": "hello", "page": "q", "retry": True}), hellos.wanted({"kind": "hello"})
        (True, True)
    """

    KEPT = 64
    """Pages remembered: a notebook reopened many times must not grow the set without end."""

    AGAIN_AFTER = 5.0
    """Seconds after an answer was sent (:meth:`sent`) within which a repeat from its page is not answered;
    later, the page's answer was lost (a page says hello every 1.5 s; hellos queued behind a busy cell are
    read together just after the answer, however long sending its rows took)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._answered: OrderedDict[str, float] = OrderedDict()
        self._clock = clock

    def wanted(self, content: dict[str, Any]) -> bool:
        """Whether to answer this hello with every row (and remember when its page was answered)."""
        page = content.get("page")
        if not isinstance(page, str) or not page:
            return True
        now = self._clock()
        last = self._answered.get(page)
        if content.get("retry") is True and last is not None and now - last < self.AGAIN_AFTER:
            return False
        self._answered[page] = now
        self._answered.move_to_end(page)
        while len(self._answered) > self.KEPT:
            self._answered.popitem(last=False)
        return True

    def sent(self, content: dict[str, Any]) -> None:
        """The answer to this hello has been sent: its page's quiet time starts now.

        A long run's rows take a while to send, and the hellos queued meanwhile must not each send them again.
        """
        page = content.get("page")
        if isinstance(page, str) and page in self._answered:
            self._answered[page] = self._clock()


def welcome(content: dict[str, Any]) -> dict[str, Any]:
    """What the debugger sends after the rows it answered a hello with: the page stops saying hello.

    Example:
        >>> welcome({"kind": "hello", "page": "p"})
        {'kind': 'welcome', 'page': 'p'}
    """
    page = content.get("page")
    return {"kind": "welcome", "page": page if isinstance(page, str) else ""}
