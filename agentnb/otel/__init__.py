"""OpenTelemetry GenAI traces in and out.

Export a run as spans that follow the OpenTelemetry semantic conventions for generative AI (live with
``Loop(tracer_provider=...)``, or after the fact with :func:`export`), and read such spans back -- from
agentnb, PydanticAI, or anything else that writes them -- as transcripts with :func:`import_trace`, or, for a
file too large to hold (the Collector's JSON Lines), one invocation at a time with :func:`iter_trace`.

Spans written (see :mod:`agentnb.otel._export`): ``invoke_agent {agent}`` for the run, ``chat {model}`` per
model request, ``execute_tool {tool}`` per call. Attributes written and read:

=====================================  ========================================  ============================
attribute                              written                                    read
=====================================  ========================================  ============================
``gen_ai.operation.name``              every span                                 groups and orders spans
``gen_ai.provider.name``               every span (``openai``, ``anthropic``...)  the model's provider
``gen_ai.system``                      same value (deprecated, widely read)       if provider.name is missing
``gen_ai.agent.name``                  agent span                                 ``settings["agent"]``
``gen_ai.conversation.id``             agent and chat spans: the operation id     ``settings["operation_id"]``
``gen_ai.request.model``               agent and chat spans                       the run's model
``gen_ai.request.temperature`` etc.    chat spans, from the request settings      request settings
``gen_ai.response.model``, ``.id``     chat spans                                 the turn's model and id
``gen_ai.response.finish_reasons``     chat spans                                 the turn's finish reason
``gen_ai.response.time_to_first_chunk``  chat spans of streamed turns             not read
``gen_ai.usage.input/output_tokens``   chat spans; totals on the agent span       per-turn usage
``gen_ai.system_instructions``         opt-in content                             the system message
``gen_ai.input.messages``              opt-in content: what a request adds        the conversation
``agentnb.input.from``                 chat spans with content                    where the new messages go
``gen_ai.output.messages``             opt-in content                             each turn's answer
``gen_ai.tool.definitions``            opt-in content, agent span                 the tools
``gen_ai.tool.name``, ``.call.id``     tool spans                                 matches calls and results
``gen_ai.tool.type``, ``.description`` tool spans                                 not read
``gen_ai.tool.call.arguments``         opt-in content                             calls when no messages
``gen_ai.tool.call.result``            opt-in content                             results
``error.type`` + span status           failed tools, turns and runs               error results
=====================================  ========================================  ============================

``agentnb.*`` attributes carry what the conventions have no name for (the run id, the final state and its
reason, the raw finish reason, how a call was answered: executed, rejected, denied or submitted, with the
approver), so an agentnb run exported and imported again folds to the same calls, results, usage and states.

A request sends the whole conversation, but its chat span's ``gen_ai.input.messages`` holds only the
messages that are new in it (the last turn's results, a person's words), and ``agentnb.input.from`` how many
input messages came before them; the first request, and the first after a compression, hold them all (``from``
0). Written whole on every span, a run of N turns would write N^2/2 messages. The conventions let an
instrumentation limit what that attribute holds, and each value stays a valid list of input messages, so other
viewers read every span; :func:`import_trace` joins them back into each request (a trace written whole, by
another tool, is read as before).
"""

from __future__ import annotations

from ._export import SpanWriter, Tracing, export
from ._importer import import_trace
from ._spans import SpanRecord, read_spans, to_otlp_json
from ._stream import iter_trace

__all__ = ["SpanRecord", "SpanWriter", "Tracing", "export", "import_trace", "iter_trace", "read_spans",
           "to_otlp_json"]
