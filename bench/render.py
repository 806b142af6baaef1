"""What one turn costs to render on the SDK path, over the length of the history: the render cache off and on.

For each wire API, a run's history of N messages (a system prompt, the prompt, then turns of a text, a call and
its result) is rendered the way the SDK model renders a turn (``SdkModel.render``: the adapter, the model's
settings and options): with the cache off (every message rendered again, as every turn did before the cache)
and on (the run's cache warm from the turn before: the turn's two new messages are rendered). Each repeat adds
a turn, so "on" always renders a turn the cache has not seen. Gemini's model also converts each content into
the SDK's ``Content`` (``gemini sdk``): once per turn and message before, once per run and message now. The
last rows (``openai_chat turn``) are a whole turn of the Chat model through the ``openai`` client, its HTTP
answered in the process: as it was before (every message rendered, then copied by the SDK's own pass) and now.

The clock is the thread's CPU time (the machine is shared), the figure the median of the repeats: turns in a
row (as a run renders them, the garbage collector off as ``timeit`` does), in blocks alternating off and on,
each with its own history of the same length. Then the memory the cache holds at N messages (tracemalloc),
beside what the history holds.

    python bench/render.py [--sizes 100 1000 6000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from agentnb._messages import Message, TextPart, ToolCallPart, ToolResultPart
from agentnb._request import HistoryView, ModelRequest
from agentnb.events import ToolInfo
from agentnb.providers._registry import WIRE_APIS
from agentnb.providers.gemini import _model as gemini_model

TOOL = ToolInfo(name="lookup", description="Look a number up.",
                parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})


def turn(i: int) -> list[Message]:
    args = {"n": i}
    call = ToolCallPart(call_id=f"call_{i}", name="lookup", arguments_raw=json.dumps(args), arguments=args,
                        provider_data={"gemini": {"id": f"g_{i}"}})
    result = ToolResultPart(call_id=f"call_{i}", name="lookup", status="ok", content=f"entry {i}: " + "x" * 60)
    return [Message(role="assistant", parts=(TextPart(text="Looking it up."), call)),
            Message(role="tool", parts=(result,))]


def history(n: int) -> list[Message]:
    out = [Message.system("Be brief."), Message.user("Look up every number.")]
    i = 0
    while len(out) < n:
        out += turn(i)
        i += 1
    return out[:n]


def model_of(api: str) -> Any:
    wire = WIRE_APIS[api]
    return wire.model_class(wire.client("bench-key-0000000000", "http://127.0.0.1:9"), model="m")


Turn = Callable[[int], Callable[[], Any]]
"""``prepare(k)``: the k-th turn's history grown (not timed); it returns the rendering to time."""


def timed(turns: int, prepare: Turn) -> list[float]:
    """The thread's CPU seconds of each of ``turns`` turns' rendering in a row, the garbage collector off."""
    gc.collect()
    gc.disable()
    try:
        out = []
        for k in range(turns):
            render = prepare(k)
            t0 = time.thread_time()
            render()
            out.append(time.thread_time() - t0)
        return out
    finally:
        gc.enable()


def alternate(repeats: int, off: Turn, on: Turn) -> tuple[float, float]:
    """Medians of ``off`` and ``on``, run in alternating blocks of consecutive turns."""
    times: dict[str, list[float]] = {"off": [], "on": []}
    block = max(1, repeats // 3)
    done = 0
    while done < repeats:
        times["off"] += timed(block, lambda k: off(done + k))  # noqa: B023
        times["on"] += timed(block, lambda k: on(done + k))  # noqa: B023
        done += block
    return statistics.median(times["off"]), statistics.median(times["on"])


def measure(api: str, n: int, repeats: int) -> tuple[float, float]:
    """Median CPU seconds of one turn's rendering at ``n`` messages: the cache off, and on.

    Each side has its own history, grown by a turn per rendering, so "on" renders what the cache has not seen.
    """
    model = model_of(api)
    sides = {"off": history(n - 2), "on": history(n - 2)}
    renders: dict[str, Any] = {}
    model.render(ModelRequest(messages=HistoryView(sides["on"]), tools=[TOOL], renders=renders))  # the turn before

    def turn_of(side: str, cache: dict[str, Any] | None) -> Turn:
        def prepare(k: int) -> Callable[[], Any]:
            messages = sides[side]
            messages += turn(10**6 + k)
            request = ModelRequest(messages=HistoryView(messages), tools=[TOOL], renders=cache)
            return lambda: model.render(request)
        return prepare

    return alternate(repeats, turn_of("off", None), turn_of("on", renders))


def measure_gemini_sdk(n: int, repeats: int) -> tuple[float, float]:
    """The same for the Gemini model's conversion of the rendered contents into the SDK's ``Content``.

    The contents are rendered (untimed) through the cache on both sides, as the model sends them.
    """
    from google.genai import types

    model = model_of("gemini")
    sides = {"off": history(n - 2), "on": history(n - 2)}
    caches: dict[str, dict[str, Any]] = {"off": {}, "on": {}}
    for side in sides:
        body = model.render(ModelRequest(messages=HistoryView(sides[side]), tools=[TOOL], renders=caches[side]))
        gemini_model._contents(types, body["contents"], caches[side])

    def turn_of(side: str) -> Turn:
        def prepare(k: int) -> Callable[[], Any]:
            messages = sides[side]
            messages += turn(10**6 + k)
            contents = model.render(ModelRequest(messages=HistoryView(messages), tools=[TOOL],
                                                 renders=caches[side]))["contents"]
            cache = caches[side] if side == "on" else None
            return lambda: gemini_model._contents(types, contents, cache)
        return prepare

    return alternate(repeats, turn_of("off"), turn_of("on"))


ANSWER = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [{
    "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def measure_sdk_turn(n: int, repeats: int) -> tuple[float, float]:
    """A whole turn of the Chat model through the ``openai`` client, its HTTP answered in the process.

    "Off" is the turn as it was before the cache: every message rendered, then copied by the SDK's own pass
    (``maybe_transform``, about 200 µs a message); "on" is the turn now (the cache, and the history handed to the
    SDK as it is). What stays O(n) a turn either way: the JSON text of the body, and the wire capture.
    """
    import httpx
    import openai

    from agentnb.providers._sdk import call_kwargs

    class Before(WIRE_APIS["openai_chat"].model_class):  # type: ignore[misc, name-defined]
        def _send(self, body: dict[str, Any]) -> Any:
            create = self.client.chat.completions.create
            return create(**call_kwargs(create, body))  # every parameter through the SDK's copy

    http = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, json=ANSWER)))
    client = openai.OpenAI(api_key="bench-key-0000000000", base_url="http://127.0.0.1:9/v1", http_client=http)
    model = WIRE_APIS["openai_chat"].model_class(client, model="m")
    before = Before(client, model="m")
    sides = {"off": history(n - 2), "on": history(n - 2)}
    renders: dict[str, Any] = {}
    list(model.respond(ModelRequest(messages=HistoryView(sides["on"]), tools=[TOOL], renders=renders)))

    def turn_of(side: str, cache: dict[str, Any] | None) -> Turn:
        sends = before if side == "off" else model

        def prepare(k: int) -> Callable[[], Any]:
            messages = sides[side]
            messages += turn(10**6 + k)
            request = ModelRequest(messages=HistoryView(messages), tools=[TOOL], renders=cache)
            return lambda: list(sends.respond(request))
        return prepare

    return alternate(min(repeats, 6), turn_of("off", None), turn_of("on", renders))


def memory(api: str, n: int) -> tuple[int, int]:
    """Bytes the history of ``n`` messages holds, and bytes the cache holds once it rendered that history."""
    model = model_of(api)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    messages = history(n)
    held = tracemalloc.get_traced_memory()[0] - base
    renders: dict[str, Any] = {}
    body = model.render(ModelRequest(messages=HistoryView(messages), tools=[TOOL], renders=renders))
    if api == "gemini":
        from google.genai import types

        gemini_model._contents(types, body["contents"], renders)
    del body
    gc.collect()
    cached = tracemalloc.get_traced_memory()[0] - base - held
    tracemalloc.stop()
    return held, cached


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 6000])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    names = [*WIRE_APIS, "gemini sdk", "openai_chat turn"]
    print("one turn's rendering, median CPU ms (the cache off = every message again, as before; on = the new ones)")
    print(f"{'wire API':<18} {'messages':>8} {'off ms':>9} {'on ms':>8} {'off µs/msg':>10} {'on/off':>7}")
    flat: dict[str, list[float]] = {}
    for name in names:
        for n in args.sizes:
            measured = {"gemini sdk": measure_gemini_sdk, "openai_chat turn": measure_sdk_turn}
            off, on = measured[name](n, args.repeats) if name in measured else measure(name, n, args.repeats)
            flat.setdefault(name, []).append(on)
            print(f"{name:<18} {n:>8,} {off * 1e3:>9.3f} {on * 1e3:>8.3f} {off / n * 1e6:>10.2f} {on / off:>7.4f}")
    print()
    lo, hi = args.sizes[0], args.sizes[-1]
    print(f"the curve with the cache on: a turn at {hi:,} messages costs x times a turn at {lo:,} (1.0 is flat)")
    print("  " + ", ".join(f"{name} {values[-1] / values[0]:.2f}" for name, values in flat.items()))
    print()
    print(f"memory at {hi:,} messages (tracemalloc): the history's own, and what the run's cache holds beside it")
    print(f"{'wire API':<18} {'history B/msg':>13} {'cache B/msg':>12} {'cache MB':>9}")
    for name in WIRE_APIS:
        held, cached = memory(name, hi)
        print(f"{name:<18} {held / hi:>13.0f} {cached / hi:>12.0f} {cached / 2**20:>9.2f}")
    print("(the cache holds the history last rendered, no other: it shrinks with a compression, and is dropped "
          "with the run and when the run ends)")


if __name__ == "__main__":
    main()
