"""The sans-IO core: the fold that turns events into a run's state, and every decision about what comes next.

Theory of operation. A run *is* its event log. :class:`RunState` is the fold of that log: applying events
one by one (each checked against the transition table in :mod:`agentnb._states`) rebuilds the conversation,
the calls of the current turn, the usage so far and the loop state. :func:`decide` looks at a ``RunState``
and says what happens next, without doing it and without writing to the state:

- :class:`Emit` -- a decision that needs no I/O (a request is due, a call was parsed or validated, the
  results are bound, a guard tripped, the run is over): the engine built the event, the driver stamps
  (:func:`stamp`: ``seq``, ``ts``, ``run_id``, ``turn``) and appends it;
- :class:`PullModel` -- read the next item of the model's answer (a fragment or the whole turn);
- :class:`RunTool` -- execute one validated call;
- :class:`Compress` -- summarize the older history (tier 1);
- :class:`Wait` -- a person has to approve or deny something; nothing happens until they do;
- :class:`Done` -- the run is in a terminal state.

What the driver brings back from I/O (an item of the model's answer, a model error and the time spent, a
tool's outcome, the effect ledger's answer, a person's decision) becomes an event through the functions of
:mod:`.inputs` and :mod:`.calls`, which hold the rules for it: call-id assignment, retry or fail, outcome
unknown, the next state after an approval. The engine depends on tools only through the small
:class:`ToolSpec` protocol, never on the registry that runs them.

Because the engine never performs I/O, each decision is testable in microseconds, and the same engine
serves live runs, replays of saved transcripts and time travel (fold a prefix, see ``Run.fork``).

Modules: :mod:`.fold` (the fold), :mod:`.actions` (actions, configuration, protocols), :mod:`.build`
(event headers), :mod:`.decide` (the next step), :mod:`.calls` (one call's rules), :mod:`.inputs` (I/O
results as events), :mod:`.view` (the read-only views of a state that callbacks and ``run.view`` get). This
package re-exports them all.
"""

from .actions import *  # noqa: F403
from .actions import __all__ as _actions_all
from .build import *  # noqa: F403
from .build import __all__ as _build_all
from .calls import *  # noqa: F403
from .calls import __all__ as _calls_all
from .decide import *  # noqa: F403
from .decide import __all__ as _decide_all
from .effects import *  # noqa: F403
from .effects import __all__ as _effects_all
from .fold import *  # noqa: F403
from .fold import __all__ as _fold_all
from .inputs import *  # noqa: F403
from .inputs import __all__ as _inputs_all
from .receive import *  # noqa: F403
from .receive import __all__ as _receive_all
from .results import *  # noqa: F403
from .results import __all__ as _results_all
from .view import *  # noqa: F403
from .view import __all__ as _view_all

__all__ = [*_fold_all, *_actions_all, *_build_all, *_calls_all, *_decide_all, *_effects_all, *_inputs_all,
           *_receive_all, *_results_all, *_view_all]
