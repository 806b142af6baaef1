"""The sans-IO core: the fold that turns events into a run's state, and the decision of what comes next.

Theory of operation. A run *is* its event log. :class:`RunState` is the fold of that log: applying events
one by one (each checked against the transition table in :mod:`agentnb.states`) rebuilds the conversation,
the calls of the current turn, the usage so far and the loop state. :func:`decide` looks at a ``RunState``
and says what happens next, without doing it:

- :class:`Emit` -- a decision that needs no I/O (a request is due, a call was parsed or validated, the
  results are bound, a guard tripped, the run is over): the driver appends the event as given;
- :class:`PullModel` -- read the next item of the model's answer (a fragment or the whole turn);
- :class:`RunTool` -- execute one validated call;
- :class:`Wait` -- a person has to approve or deny something; nothing happens until they do;
- :class:`Done` -- the run is in a terminal state.

Because the engine never performs I/O, each decision is testable in microseconds, and the same engine
serves live runs, replays of saved transcripts and time travel in the debugger (fold a prefix).

:mod:`.fold` holds the fold, :mod:`.decide` the decisions; this package re-exports both.
"""

from .decide import *  # noqa: F403
from .decide import __all__ as _decide_all
from .fold import *  # noqa: F403
from .fold import __all__ as _fold_all

__all__ = [*_fold_all, *_decide_all]
