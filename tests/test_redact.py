"""The masking functions: streams split anywhere, pieces of secrets, schemas, credentials, and secret= tools."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr

import agentnb as anb
from agentnb._redact import (
    MASK,
    MAX_HOLD,
    StreamRedactor,
    client_credentials,
    mask_pieces,
    redact,
    redact_json_text,
    register_credentials,
    register_secret,
    secret_names,
)

LITERAL = "zq9-literal-in-stream-0417"
register_secret(LITERAL)
SECRETS = [LITERAL, "sk-proj-streamedKEY0123456789", "AIzaSyA-streamed-1234567890abcd", "hunter2-pin-value", "90817263"]
TEXT = json.dumps({"note": f"try {SECRETS[1]} or {LITERAL}", "url": f"https://m.test/?key={SECRETS[2]}&x=1",
                   "pin": SECRETS[3], "list": ["a", "b"], "Authorization": "Bearer abc.def-ghi", "code": 90817263})


def feed_all(fragments: list[str], names: frozenset[str]) -> tuple[str, StreamRedactor]:
    r = StreamRedactor(names)
    return "".join(r.feed(f) for f in fragments), r


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(TEXT)), max_size=40))
def test_a_stream_split_anywhere_shows_no_secret_and_adds_up_to_the_masked_whole(cuts: list[int]) -> None:
    points = sorted({0, len(TEXT), *cuts})
    fragments = [TEXT[a:b] for a, b in zip(points, points[1:], strict=False)]
    names = frozenset({"pin", "code"})
    shown, r = feed_all(fragments, names)
    for secret in SECRETS:
        for i in range(len(secret) - 5):  # not even six characters of any secret in a decided fragment
            assert secret[i : i + 6] not in shown
    assert shown + redact_json_text(r.held, names) == redact_json_text(TEXT, names)
    assert json.loads(redact_json_text(TEXT, names))["code"] == MASK


def test_an_over_long_secret_value_is_masked_whole_and_swallowed() -> None:
    value = "x" * (MAX_HOLD * 30)
    text = json.dumps({"password": value, "after": "kept"})
    fragments = [text[i : i + 8] for i in range(0, len(text), 8)]  # linear: a quadratic redactor would crawl
    shown, r = feed_all(fragments, frozenset())
    shown += r.held
    assert "xxxxxxxx" not in shown and shown.count(MASK) == 1
    assert shown.endswith('"after": "kept"}')
    token = "sk-" + "A" * (MAX_HOLD * 3)
    shown, r = feed_all([token[i : i + 100] for i in range(0, len(token), 100)] + [" end"], frozenset())
    assert shown + r.held == MASK + " end"


def test_pieces_of_a_secret_in_split_events_are_masked() -> None:
    secret = "zq9-plain-credential-7731"
    assert mask_pieces('{"a": "zq9-pl', [secret]) == '{"a": "' + MASK
    assert mask_pieces("ain-credent", [secret]) == MASK
    assert mask_pieces('ial-7731"}', [secret]) == MASK + '"}'
    assert mask_pieces("plain text", [secret]) == "plain text"
    assert mask_pieces("abc", [secret]) == "abc"  # too short to tell


def test_keys_that_name_credentials_mask_values_but_not_schemas() -> None:
    schema = {"properties": {"api_key": {"type": "string"}, "password": {"type": "string", "writeOnly": True}}}
    assert redact(schema) == schema
    masked = redact({"api_key": "abc", "nested": [{"password": "p"}]})
    assert masked == {"api_key": MASK, "nested": [{"password": MASK}]}


class Inner(BaseModel):
    passphrase: SecretStr
    label: str


def test_secret_names_follow_refs_and_optionals() -> None:
    @anb.tool(secret=["dsn"])
    def connect(dsn: str, inner: Inner, pin: SecretStr | None = None, host: str = "h") -> str:
        """Connect."""
        return host

    assert secret_names(connect.parameters) == {"dsn", "passphrase", "pin"}
    assert connect.parameters["properties"]["dsn"]["writeOnly"] is True
    assert connect.secret == ("dsn", "passphrase", "pin")
    dumped = connect.dump(connect.validate({"dsn": "d", "inner": {"passphrase": "s3", "label": "l"}, "pin": "p"}))
    assert dumped == {"dsn": "d", "inner": {"passphrase": "s3", "label": "l"}, "pin": "p", "host": "h"}


def test_secret_option_names_must_be_parameters() -> None:
    with pytest.raises(anb.ToolDefinitionError, match="names no parameter"):
        @anb.tool(secret=["api_key"])
        def f(key: str) -> str:
            """F."""
            return key


def test_credentials_of_clients_and_models() -> None:
    class Api:
        api_key = "zq9-nested-client-key-1"

    class GenaiLike:
        _api_client = Api()

    assert client_credentials(GenaiLike()) == ["zq9-nested-client-key-1"]

    class Holder:
        def credentials(self) -> list[str]:
            return ["zq9-declared-by-a-model-2"]

    assert register_credentials(Holder()) == ["zq9-declared-by-a-model-2"]
    assert redact("echo zq9-declared-by-a-model-2") == f"echo {MASK}"
    assert register_credentials(object()) == []


def test_credentials_of_the_real_sdk_clients_sync_and_async() -> None:
    import anthropic
    import openai
    from google import genai

    url = "http://127.0.0.1:9"
    gemini = genai.Client(api_key="zq9-genai-key-0001", http_options={"base_url": url})
    assert "zq9-genai-key-0001" in client_credentials(gemini)
    assert "zq9-genai-key-0001" in client_credentials(gemini.aio)
    assert "zq9-anthropic-token-2" in client_credentials(anthropic.Anthropic(auth_token="zq9-anthropic-token-2",
                                                                              base_url=url))
    assert "zq9-anthropic-async-3" in client_credentials(anthropic.AsyncAnthropic(api_key="zq9-anthropic-async-3",
                                                                                   base_url=url))
    proxied = openai.AsyncOpenAI(api_key="zq9-openai-4", base_url=url, default_headers={"X-Api-Key": "zq9-proxy-5"})
    assert {"zq9-openai-4", "zq9-proxy-5"} <= set(client_credentials(proxied))
    model = anb.GeminiModel(gemini.aio, model="gemini-2.5-flash")
    assert "zq9-genai-key-0001" in model.credentials()


_PIECES = st.sampled_from(["sk-", "sk-ant-", "AIza", "Bearer ", "bEaReR\t", "?key=", "&API_KEY=", "?api_Key=",
                           "?\u212aey=", "\u212a", "abcdefgh12345678", "-_.~+/", "=", " ", "\n", "İ", "ı", "ſ",
                           "x", "Z9", "\"", "&"])


@settings(max_examples=150, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_the_substring_hints_skip_no_secret_the_patterns_would_mask(text: str) -> None:
    """redact_text tests cheap substrings before each pattern; the result is what every pattern applied gives."""
    from agentnb._redact.patterns import PATTERNS, redact_text

    expected = text
    for pattern, replacement in PATTERNS:
        expected = pattern.sub(replacement, expected)
    assert redact_text(text) == expected
