"""The driver's ports and parts: what :class:`~agentnb.Run` uses to do I/O, one concern a module.

- :mod:`.model_port` -- asking the model: one request per turn, pulled one stream item per step, returned as
  typed I/O results (:mod:`agentnb._engine.results`);
- :mod:`.tool_port` -- running a turn's calls: claims on the effect ledger, the bounded thread pool, time
  limits, cancellation; returned as typed I/O results;
- :mod:`.journal` -- the run's log as the driver writes it: receive, stamp, mask, persist, then fold and tell the
  listeners (with the state after the event); held results and lost replies after a store fault;
- :mod:`.admit` -- which of a turn's calls run (ledger claims, a fork's policy) and :func:`.admit.perform`, which
  runs them through the tool port;
- :mod:`.lease` -- one driver at a time (the run's lease in the store, kept alive while the driver waits);
- :mod:`.reconcile` -- after a failed write, what the store kept (a reply lost after the commit);
- :mod:`.listeners` -- what a listener (``Run.on_event``) that raises costs: a warning, nothing else;
- :mod:`.scrub` -- masking secrets in an event before it is stored;
- :mod:`._history` -- histories for compression and follow-ups, the policy hash, settings recorded at start;
- :mod:`.resume` -- a stored run folded again and checked (``Run.resume``);
- :mod:`.fork` -- time travel: how a fork of a run's log starts (``Run.fork``);
- :mod:`.loopspec` -- what a run reads of its loop (a protocol, so the driver never imports ``loop.py``).

None of them holds a ``Run``, calls back into one, or decides what the run does next: the rules are
:mod:`agentnb._engine`'s (``decide`` and ``receive``).
"""
