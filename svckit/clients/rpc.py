"""Typed methods of a client, one line per RPC: ``get_key = Unary(pb.GetKeyRequest, pb.GetKeyResponse)``.

The attribute's name gives the RPC (``get_key`` -> ``GetKey``); the service is the one of the request's
proto file that has it, checked against both message types when the class is made, so a misspelt or
mistyped method fails at import. On first use a client binds the method to its channel once (the bound
method then sits in the instance: later uses are a plain attribute read).

A unary method is awaited with the client's deadline unless ``timeout=`` says otherwise; a streaming one
returns a ``ResponseStream`` at once, with no deadline unless given. Every gRPC error, a stream's too,
arrives as a ``ClientError`` (svckit.clients.errors).

Retries: an RPC that may always run twice is in its client's ``RETRIED`` (gRPC's own retry policy, the
channel's service config). One that may run twice only for some requests declares ``retry_if=``, a test of
the request (``publish_event``: when it carries an idempotency key); the client then tries such a call again
on UNAVAILABLE, after 0.05 s, then 0.1 s (three attempts in all), all within the call's one deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Generic, Self, TypeVar, overload

import grpc
from google.protobuf.message import Message

from svckit.cancellation import raise_if_cancelling
from svckit.clients.channels import open_channel
from svckit.clients.errors import client_error
from svckit.clients.interceptors import request_id_interceptors
from svckit.tls import Tls

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)

# The deadline of a unary call when the client is not given another (seconds).
DEFAULT_TIMEOUT = 10.0

Metadata = Sequence[tuple[str, str]]

# A unary call whose request passes its method's ``retry_if``: attempts in all on UNAVAILABLE, and the
# pause before the second (doubled before each later one).
RETRY_ATTEMPTS = 3
RETRY_BACKOFF = 0.05


class Client:
    """A channel to one peer (``SERVER``, the name its certificate carries) with the request-id
    interceptor, and the ``Unary``/``Stream`` methods its subclass declares."""

    SERVER: ClassVar[str]
    # {full service name: RPCs that may safely run twice}: retried on another address (channels).
    RETRIED: ClassVar[dict[str, Sequence[str]]] = {}

    def __init__(
        self,
        address: str | Iterable[str],
        tls: Tls | None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.timeout = timeout
        self.channel = open_channel(
            address,
            tls,
            self.SERVER,
            retried=self.RETRIED,
            options=options,
            interceptors=request_id_interceptors(),
        )

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class UnaryMethod(Generic[Req, Resp]):
    """A unary RPC bound to a client's channel."""

    __slots__ = ("_call", "_retry_if", "_timeout")

    def __init__(self, call: Any, timeout: float, retry_if: Callable[[Req], bool] | None = None) -> None:
        self._call = call
        self._timeout = timeout
        self._retry_if = retry_if

    async def __call__(
        self,
        request: Req,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (the gRPC deadline, which the server sees too)
        wait_for_ready: bool | None = None,
        metadata: Metadata | None = None,
        retry: bool = True,
    ) -> Resp:
        """The call; ``retry=False``: one attempt even where ``retry_if`` allows more (a caller that
        retries on its own schedule and counts its attempts, as authsvc's outbox relay)."""
        budget = self._timeout if timeout is None else timeout
        retried = retry and self._retry_if is not None and self._retry_if(request)
        attempts = RETRY_ATTEMPTS if retried else 1
        end, backoff = time.monotonic() + budget, RETRY_BACKOFF
        for attempt in range(1, attempts + 1):
            try:
                response: Resp = await self._call(
                    request,
                    timeout=budget if attempt == 1 else end - time.monotonic(),
                    metadata=metadata,
                    wait_for_ready=wait_for_ready,
                )
                return response
            except grpc.aio.AioRpcError as exc:
                raise_if_cancelling(exc)
                again = (
                    attempt < attempts
                    and exc.code() == grpc.StatusCode.UNAVAILABLE
                    and end - time.monotonic() > backoff
                )
                if not again:
                    raise client_error(exc) from None
            await asyncio.sleep(backoff)
            backoff *= 2
        raise AssertionError("unreachable: the last attempt returns or raises")


class ResponseStream(Generic[Resp]):
    """The messages of a server-streaming call, as an async iterator; its errors are ClientErrors."""

    __slots__ = ("_call",)

    def __init__(self, call: Any) -> None:
        self._call = call

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Resp:
        message = await self.read()
        if message is None:
            raise StopAsyncIteration
        return message

    async def read(self) -> Resp | None:
        """The next message, None once the server ended the stream."""
        try:
            message = await self._call.read()
        except grpc.aio.AioRpcError as exc:
            raise_if_cancelling(exc)
            raise client_error(exc) from None
        return None if message is grpc.aio.EOF else message

    def cancel(self) -> bool:
        """Ends the call (the server sees it cancelled); reading then raises CancelledError."""
        return bool(self._call.cancel())


class StreamMethod(Generic[Req, Resp]):
    """A server-streaming RPC bound to a client's channel."""

    __slots__ = ("_call",)

    def __init__(self, call: Any) -> None:
        self._call = call

    def __call__(
        self,
        request: Req,
        *,
        timeout: float | None = None,
        wait_for_ready: bool | None = None,
        metadata: Metadata | None = None,
    ) -> ResponseStream[Resp]:
        return ResponseStream(
            self._call(request, timeout=timeout, metadata=metadata, wait_for_ready=wait_for_ready)
        )


class _Rpc(Generic[Req, Resp]):
    streaming: ClassVar[bool]

    def __init__(
        self, request: type[Req], response: type[Resp], *, retry_if: Callable[[Req], bool] | None = None
    ) -> None:
        self.request = request
        self.response = response
        self.retry_if = retry_if
        self.name = ""
        self.path = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.path = method_path(self.request, self.response, name, self.streaming)

    def _multicallable(self, channel: grpc.aio.Channel) -> Any:
        make = channel.unary_stream if self.streaming else channel.unary_unary
        return make(
            self.path,
            request_serializer=self.request.SerializeToString,
            response_deserializer=self.response.FromString,
            _registered_method=True,
        )


class Unary(_Rpc[Req, Resp]):
    """Declares a unary RPC on a Client: ``get_key = Unary(pb.GetKeyRequest, pb.GetKeyResponse)``."""

    streaming = False

    @overload
    def __get__(self, client: None, owner: type) -> Self: ...
    @overload
    def __get__(self, client: Client, owner: type) -> UnaryMethod[Req, Resp]: ...
    def __get__(self, client: Client | None, owner: type) -> Self | UnaryMethod[Req, Resp]:
        if client is None:
            return self
        bound: UnaryMethod[Req, Resp] = UnaryMethod(
            self._multicallable(client.channel), client.timeout, self.retry_if
        )
        client.__dict__[self.name] = bound
        return bound


class Stream(_Rpc[Req, Resp]):
    """Declares a server-streaming RPC on a Client."""

    streaming = True

    @overload
    def __get__(self, client: None, owner: type) -> Self: ...
    @overload
    def __get__(self, client: Client, owner: type) -> StreamMethod[Req, Resp]: ...
    def __get__(self, client: Client | None, owner: type) -> Self | StreamMethod[Req, Resp]:
        if client is None:
            return self
        bound: StreamMethod[Req, Resp] = StreamMethod(self._multicallable(client.channel))
        client.__dict__[self.name] = bound
        return bound


def rpc_name(attribute: str) -> str:
    """``get_key`` -> ``GetKey``."""
    return "".join(part.capitalize() for part in attribute.split("_"))


def method_path(request: type[Message], response: type[Message], attribute: str, streaming: bool) -> str:
    """``/package.Service/Method`` of the RPC ``attribute`` names, checked against its messages."""
    name = rpc_name(attribute)
    file = request.DESCRIPTOR.file
    for service in file.services_by_name.values():
        method = service.methods_by_name.get(name)
        if method is None:
            continue
        if (
            method.input_type is not request.DESCRIPTOR
            or method.output_type is not response.DESCRIPTOR
            or bool(method.server_streaming) is not streaming
            or method.client_streaming
        ):
            raise TypeError(f"{attribute}: {service.full_name}/{name} takes or gives other messages")
        return f"/{service.full_name}/{name}"
    raise TypeError(f"{attribute}: no RPC {name} in {file.name}")
