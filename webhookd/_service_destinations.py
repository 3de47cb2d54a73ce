"""Where a registered or updated endpoint's deliveries go (``webhookd._destinations``): the type, the url
(http only) and the broker settings, checked together before anything is written, each refusal naming its
field. Broker hosts pass the webhook URL address policy (``webhookd._ssrf``) as URLs do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from svckit.webhook_status import DestinationType
from webhookd import _convert as cv
from webhookd._destination_settings import Settings, amqp_settings, check_hosts, nats_settings
from webhookd._errors import InvalidRequest
from webhookd._repository import EndpointRecord
from webhookd._ssrf import Policy, Resolver, check_target

# The update mask's paths this module owns ("url" is the http type's).
DESTINATION_PATHS = ("url", "type", "amqp", "nats")
_SETTINGS = {DestinationType.AMQP: "amqp", DestinationType.NATS: "nats"}


async def _settings(
    kind: DestinationType,
    request: Any,
    given: Sequence[str],
    stored: Settings | None,
    policy: Policy,
    resolver: Resolver,
) -> Settings | None:
    """The type's settings: from the request where ``given`` names them, else ``stored``."""
    for other in _SETTINGS.values():
        if other in given and _SETTINGS.get(kind) != other:
            raise InvalidRequest(f"{other}: only for an endpoint of type {other} (this one is {kind})")
    if kind not in _SETTINGS:
        return None
    name = _SETTINGS[kind]
    if name not in given:
        if stored is None:
            raise InvalidRequest(f"{name}: is required for an endpoint of type {name}")
        return stored
    settings = (amqp_settings if kind is DestinationType.AMQP else nats_settings)(
        getattr(request, name), stored
    )
    await check_hosts(settings, f"{name}.{'url' if name == 'amqp' else 'servers'}", policy, resolver)
    return settings


async def registered(request: Any, policy: Policy, resolver: Resolver) -> dict[str, Any]:
    """A RegisterEndpointRequest's destination: the record's ``url``, ``destination_type`` and
    ``destination``."""
    kind = cv.destination_type(request.type)
    given = [name for name in _SETTINGS.values() if request.HasField(name)]
    if kind is DestinationType.HTTP:
        await check_target(cv.url(request.url), policy, resolver)
    elif request.url:
        raise InvalidRequest(f"url: an endpoint of type {kind} has no url")
    settings = await _settings(kind, request, given, None, policy, resolver)
    return {"url": request.url, "destination_type": kind, "destination": settings}


async def updated(
    request: Any, paths: Sequence[str], endpoint: EndpointRecord, policy: Policy, resolver: Resolver
) -> dict[str, Any]:
    """An UpdateEndpointRequest's changes to the destination (none when the mask names none of
    ``DESTINATION_PATHS``). A type change needs what the new type needs; settings kept otherwise, and a
    password or token left empty keeps the stored one."""
    if not set(paths) & set(DESTINATION_PATHS):
        return {}
    kind = cv.destination_type(request.type) if "type" in paths else endpoint.destination_type
    same = kind is endpoint.destination_type
    url = endpoint.url if same else ""
    if kind is DestinationType.HTTP:
        if "url" in paths:
            await check_target(cv.url(request.url), policy, resolver)
            url = request.url
        elif not same:
            raise InvalidRequest("url: is required for an endpoint of type http")
    elif "url" in paths and request.url:
        raise InvalidRequest(f"url: an endpoint of type {kind} has no url")
    stored = endpoint.destination if same else None
    settings = await _settings(kind, request, paths, stored, policy, resolver)
    return {"url": url, "destination_type": kind, "destination": settings}
