"""The driver's parts: what :class:`~agentnb.Run` uses to do I/O, one concern a module.

- :mod:`.stream` -- asking the model: one request per turn, pulled one stream item per step;
- :mod:`.executor` -- running a turn's calls: the effect ledger, the bounded thread pool, time limits;
- :mod:`.lease` -- one driver at a time (the run's lease in the store);
- :mod:`.listeners` -- what a listener (``Run.on_event``) that raises costs: a warning, nothing else;
- :mod:`.scrub` -- masking secrets in an event before it is stored;
- :mod:`.history` -- histories for compression and follow-ups, the policy hash, settings recorded at start;
- :mod:`.approvals` -- what a person's answer is checked against before it is recorded;
- :mod:`.resume` -- a stored run folded again, checked, and taken over (``Run.resume``);
- :mod:`.fork` -- time travel: a new run from a prefix of a run's log (``Run.fork``).

None of them decides what the run does next: that is :mod:`agentnb.engine`.
"""
