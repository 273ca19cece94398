"""`set_access_token`: the SDK checks a token with `GET graph/1933525276802129?fields=id` and
`Authorization: OAuth <token>`, and turns a 401 into InvalidTokenError using the error body's
`message`, `type`, `code` and `fbtrace_id` (a missing member would be a KeyError instead)."""

import pytest
import requests
from mapillary.models.client import Client
from mapillary.models.exceptions import InvalidTokenError

TOKEN_CHECK_PATH = "/1933525276802129"


def test_valid_token_is_accepted_and_used(service, sdk):
    mark = service.rewrite.mark()
    assert sdk.set_access_token(service.token) == {"token": "SUCCESS"}
    assert Client.get_token() == service.token
    checks = [e for e in service.rewrite.since(mark) if TOKEN_CHECK_PATH in e.url]
    assert len(checks) == 1, [e.url for e in service.rewrite.since(mark)]
    assert checks[0].headers.get("Authorization") == f"OAuth {service.token}"
    # The ID is unknown in the fixtures: an accepted token gets docs/API.md's unknown-ID error
    # (404, GraphMethodException, code 100, subcode 33); a 401 or a 500 is a failure.
    assert checks[0].status == 404, checks[0].status
    response = requests.get(
        service.url(f"{TOKEN_CHECK_PATH}?fields=id"),
        headers={"Authorization": f"OAuth {service.token}"},
    )
    assert response.status_code == 404, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert (error["type"], error["code"], error["error_subcode"]) == ("GraphMethodException", 100, 33), error


def test_bad_token_raises_invalid_token_error(service, sdk):
    bad_token = "MLY|0|not-a-token"
    with pytest.raises(InvalidTokenError) as raised:
        sdk.set_access_token(bad_token)
    error = raised.value
    assert error.error_type == "OAuthException"
    assert error.code == 190
    assert isinstance(error.fbtrace_id, str) and error.fbtrace_id
    assert isinstance(error.message, str) and error.message
    # The rejected token is not kept: the SDK still holds the fixture app's token.
    assert Client.get_token() == service.token


def test_bad_token_error_body_has_the_graph_shape(service):
    response = requests.get(
        service.url(f"{TOKEN_CHECK_PATH}?fields=id"),
        headers={"Authorization": "OAuth nonsense"},
    )
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["type"] == "OAuthException"
    assert error["code"] == 190
    assert isinstance(error["fbtrace_id"], str) and error["fbtrace_id"]
