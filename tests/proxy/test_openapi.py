"""The proxy's own OpenAPI spec (/openapi.json) checked by schemathesis against a running `fastmq proxy`: requests
generated from the spec get an answer the spec describes (status, content type, JSON schema), never a 5xx; requests
that break the spec (schemathesis' negative mode) get a 4xx. Bounded: EXAMPLES per operation and mode, long polls
cut to MAX_WAIT_MS.

One rule of the proxy no JSON Schema can say: an ack token's next_offset is not before its offset. A token that
breaks it is answered 400 bad_token, which schemathesis' "schema-valid data is accepted" check would count as a
failure: for the operations that take a token, that check is replaced by one that allows exactly that answer.

(schemathesis' own pytest loaders read a node attribute pytest 9 no longer has: each operation's strategy is
driven by hypothesis here instead.)"""
from __future__ import annotations

import json

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from fastmq.proxy.openapi import spec_json

EXAMPLES = 15
MAX_WAIT_MS = 100
SPEC = json.loads(spec_json(1000, 100, 30000))
# (method, path, mode): every operation with valid input, and those that take input with input that breaks the spec.
CASES = [(method.upper(), path, mode) for path, methods in SPEC["paths"].items() for method, operation in methods.items()
         for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
         if mode == GenerationMode.POSITIVE or "parameters" in operation or "requestBody" in operation]


TAKES_A_TOKEN = {("GET", "/message"), ("POST", "/ack"), ("POST", "/nack")}


@pytest.fixture(scope="module")
def proxy_schema(proxies):
    return schemathesis.openapi.from_url(f"http://127.0.0.1:{proxies.ports[0]}/openapi.json")


@pytest.fixture(scope="module")
def session():
    with requests.Session() as session:
        yield session


def token_out_of_order(response: requests.Response) -> bool:
    if response.status_code != 400:
        return False
    answer = response.json()
    return answer["error"] == "bad_token" and "next_offset is before offset" in answer["message"]


@pytest.mark.parametrize("method, path, mode", CASES, ids=[f"{m} {p} {mode}" for m, p, mode in CASES])
def test_every_answer_is_one_the_spec_describes(proxy_schema, session, method, path, mode):
    operation = proxy_schema[path][method]
    replaced = mode == GenerationMode.POSITIVE and (method, path) in TAKES_A_TOKEN
    excluded = [positive_data_acceptance] if replaced else []

    @given(case=operation.as_strategy(mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck), database=None)
    def check(case) -> None:
        query = case.query or {}
        if "wait_ms" in query:
            query["wait_ms"] = min(int(query["wait_ms"]), MAX_WAIT_MS) if str(query["wait_ms"]).isdigit() else 0
        response = case.call_and_validate(session=session, timeout=15, excluded_checks=excluded)
        if replaced:
            assert response.status_code < 400 or response.status_code in (401, 403, 404, 409, 429) \
                or token_out_of_order(response), (response.status_code, response.text)
    check()
