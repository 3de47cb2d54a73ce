"""EdgeSanicConfig reads as Sanic's Config reads (the dict item), however a setting was written, and
covers every setting Sanic's HTTP/1.1 protocol and cycle read as attributes."""

from __future__ import annotations

import inspect
import re

import pytest
from sanic.config import Config
from sanic.http import Http, http1
from sanic.server.protocols import base_protocol, http_protocol

from edge.app import create_app
from edge.config import EdgeConfig
from edge.sanicconfig import HOT_SETTINGS, EdgeSanicConfig


def test_defaults_are_sanics() -> None:
    ours, theirs = EdgeSanicConfig(), Config()
    assert dict(ours) == dict(theirs)
    for name in HOT_SETTINGS:
        assert getattr(ours, name) == getattr(theirs, name), name


@pytest.mark.parametrize("name", HOT_SETTINGS)
@pytest.mark.parametrize("how", ["attribute", "update", "update-kw"])
def test_a_written_setting_reads_back_from_the_item(name: str, how: str) -> None:
    config = EdgeSanicConfig()
    value = {"KEEP_ALIVE": False, "ACCESS_LOG": True}.get(name, 12345)
    if how == "attribute":
        setattr(config, name, value)
    elif how == "update":
        config.update({name: value})
    else:
        config.update(**{name: value})
    assert config[name] == value
    assert getattr(config, name) == value


def test_configs_own_follow_up_still_runs() -> None:
    """Config re-derives Sanic's head size limit when REQUEST_BUFFER_SIZE changes (its _post_set)."""
    before = Http.HEADER_MAX_SIZE
    try:
        config = EdgeSanicConfig()
        config.REQUEST_BUFFER_SIZE = 4096 + 1000
        assert Http.HEADER_MAX_SIZE == 1000
    finally:
        Config()  # the default settings derive the default limit again
    assert Http.HEADER_MAX_SIZE == before


def test_every_setting_sanics_http_path_reads_is_a_property() -> None:
    read: set[str] = set()
    for module in (http1, http_protocol, base_protocol):
        read |= set(re.findall(r"\.config\.([A-Z_]+)", inspect.getsource(module)))
    assert read  # the pattern still finds Sanic's reads
    assert read <= set(HOT_SETTINGS), read - set(HOT_SETTINGS)


def test_the_edge_app_uses_it_with_the_edges_settings() -> None:
    config = EdgeConfig(keep_alive_timeout=7.5, header_timeout=3.0, max_body_bytes=1234)
    app = create_app(config)
    assert isinstance(app.config, EdgeSanicConfig)
    assert (app.config.KEEP_ALIVE_TIMEOUT, app.config.REQUEST_TIMEOUT, app.config.REQUEST_MAX_SIZE) == (
        7.5,
        3.0,
        1234,
    )
    assert app.config.ACCESS_LOG is False
