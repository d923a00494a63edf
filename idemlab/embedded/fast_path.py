"""The request path without the overhead that buys no fidelity.

Profiled on a loopback PutItem/GetItem loop (cProfile, moto 5.2.5), moto's server spent
most of each request outside DynamoDB: looking up the backend for the request's host
(every lookup lists moto's package directory and stats each of its ~200 entries, under
one global lock), routing through a Flask app, listing the handler class's methods with
`inspect` on every call, and opening a TCP connection and a thread per request (the
werkzeug development server closes every connection). None of that changes an answer.
So, with the fast path on (the default; IDEMLAB_FAST_PATH=0 turns it off, for the bench's
before/after comparison):

- the backend found for a host name is remembered (the lookup is a pure function of the
  name and moto's static URL patterns);
- a handler class's method names are listed once per class, not once per request;
- the hot DynamoDB actions go straight to moto's own `DynamoHandler.dispatch`, the very
  function moto's Flask route calls, with the same normalised request: moto's models,
  condition evaluation, errors and response serialisation all stay;
- Lambda's Invoke goes straight to moto's `LambdaResponse` (whose `invoke` lambda_api.py
  replaces with the real runtime), with the action and the function name taken from the
  path as moto's router would: its `call_action`, errors and headers all stay;
- connections stay open (HTTP/1.1 keep-alive), one thread per connection;
- no access-log line per request (server errors are still logged).

What stays exactly as it was: the loopback Host/Origin guard runs first on every request,
every request to DynamoDB is still serialised by dynamodb_atomic's lock, and anything
the short path does not recognise takes moto's full route.
"""

from __future__ import annotations

import io
import os
import re
import sys
from urllib.parse import unquote

from idemlab.embedded.patching import replace_once

FAST_PATH_VARIABLE = "IDEMLAB_FAST_PATH"
DYNAMODB_TARGET_PREFIX = "DynamoDB_20120810."
# The actions the lessons' handlers and workflows call on every delivery.
HOT_DYNAMODB_ACTIONS = frozenset({"PutItem", "GetItem", "UpdateItem", "DeleteItem", "Query", "TransactWriteItems"})
# Lambda's Invoke API: POST /2015-03-31/functions/{FunctionName}/invocations
INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations$")
# An idle keep-alive connection (and its thread) is closed after this long.
KEEP_ALIVE_IDLE_SECONDS = 120


def enabled() -> bool:
    return os.environ.get(FAST_PATH_VARIABLE, "1") != "0"


def cached_dispatcher(create_app):
    """moto's host-to-backend dispatcher, remembering each host name's backend."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    class CachedDispatcher(DomainDispatcherApplication):
        def __init__(self, create):
            super().__init__(create)
            self._backend_by_host: dict = {}

        def get_backend_for_host(self, host):
            try:
                return self._backend_by_host[host]
            except KeyError:
                backend = super().get_backend_for_host(host)
                self._backend_by_host[host] = backend
                return backend

    return CachedDispatcher(create_app)


def cache_method_names() -> None:
    """`BaseResponse.call_action` lists its class's methods on every call: once per class is enough.

    Installed after every class patch of the server (they happen at start-up, before the
    first request), so the cached lists include the patched methods.
    """
    from moto.core import responses, utils

    uncached = utils.method_names_from_class
    names_by_class: dict = {}

    def method_names_from_class(clazz):
        try:
            return names_by_class[clazz]
        except KeyError:
            names_by_class[clazz] = names = uncached(clazz)
            return names

    replace_once(responses, "method_names_from_class", method_names_from_class)


def _signing_service(authorization: str | None) -> str | None:
    """The service of a SigV4 credential scope (`Credential=key/date/region/service/aws4_request`)."""
    try:
        return authorization.split(",")[0].split()[1].split("/")[3].lower()
    except (AttributeError, IndexError):
        return None


def short_paths(app):
    """WSGI middleware: hot DynamoDB actions and Lambda Invoke to moto's handlers directly,
    the rest to ``app``.

    Taken only for what moto's route would send to the same handler: a POST to `/` whose
    target is a hot DynamoDB action and whose signature names DynamoDB, or a POST to a
    function's `invocations` path signed for Lambda. Requests with an `Origin` (browsers)
    keep moto's full route and its CORS handling.
    """
    from botocore.exceptions import ClientError
    from moto.awslambda.responses import LambdaResponse
    from moto.core.request import Request
    from moto.dynamodb.responses import DynamoHandler
    from moto.moto_api import recorder
    from werkzeug.wrappers import Response

    class ServerRequest(Request):
        from_wsgi_server = True  # as moto's BackendRequest: the server supplies Date

    class InvokeResponse(LambdaResponse):
        """moto's Lambda handler, told the action moto's router would find for this path."""

        def _get_action(self) -> str:
            return "Invoke"

    def invoke_dispatch(name: str):
        def dispatch(request, full_url, headers):
            handler = InvokeResponse()
            handler.setup_class(request, full_url, headers)
            handler.uri_match = {"FunctionName": name}  # what the router sets
            return handler.call_action()

        return dispatch

    def short(environ, start_response):
        if environ.get("REQUEST_METHOD") != "POST" or "HTTP_ORIGIN" in environ:
            return app(environ, start_response)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        service = _signing_service(environ.get("HTTP_AUTHORIZATION"))
        if (
            target.startswith(DYNAMODB_TARGET_PREFIX)
            and target[len(DYNAMODB_TARGET_PREFIX) :] in HOT_DYNAMODB_ACTIONS
            and environ.get("PATH_INFO") == "/"
            and service == "dynamodb"
        ):
            dispatch = DynamoHandler.dispatch
        elif service == "lambda" and (invoke := INVOKE_PATH.match(environ.get("PATH_INFO", ""))):
            dispatch = invoke_dispatch(unquote(invoke.group("name")))
        else:
            return app(environ, start_response)
        request = ServerRequest(environ)
        recorder._record_request(request)
        # What moto's convert_to_flask_response does around the same call.
        try:
            result = dispatch(request, request.raw_url, dict(request.headers))
        except ClientError as exc:
            result = 400, {}, exc.response["Error"]["Message"]
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        response = Response(response=content, status=status, headers=headers)
        # moto's app answers every request with flask-cors' header; so does this path.
        response.headers.setdefault("Access-Control-Allow-Origin", "*")
        return response(environ, start_response)

    return short


def keep_alive_handler():
    """moto's request handler (its header handling kept), serving HTTP/1.1 keep-alive.

    werkzeug's development server always answers `Connection: close`. This handler reads
    each request body whole (by Content-Length), buffers the response, sends its length,
    and keeps the connection for the client's next request. A chunked request body takes
    werkzeug's own route, and its connection closes after it.
    """
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class KeepAliveRequestHandler(MotoRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = KEEP_ALIVE_IDLE_SECONDS
        # Kept-alive connections meet Nagle's algorithm and delayed ACKs (~40 ms a
        # request): send each answer at once, in one write.
        disable_nagle_algorithm = True

        def log_request(self, code="-", size="-") -> None:
            """Only server errors. werkzeug writes a line to the log for every request
            (~40 us each, and the bulk of a test run's log); the loopback guard logs its
            refusals itself, and an AWS error is in the answer the client got."""
            if str(code).startswith("5"):
                super().log_request(code, size)

        def run_wsgi(self) -> None:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                self.close_connection = True
                return super().run_wsgi()
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                self.close_connection = True
                self.send_error(400, "invalid Content-Length")
                return
            if self.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            environ = self.environ = self.make_environ()
            body = self.rfile.read(length) if length > 0 else b""
            if len(body) < length:  # the client went away mid-body
                self.close_connection = True
                return
            environ["wsgi.input"] = io.BytesIO(body)
            answer: dict = {}

            def start_response(status, headers, exc_info=None):
                if exc_info and "sent" in answer:
                    raise exc_info[1].with_traceback(exc_info[2])
                answer["status"], answer["headers"] = status, headers
                return chunks.append

            chunks: list[bytes] = []
            try:
                result = self.server.app(environ, start_response)
                try:
                    chunks.extend(result)
                finally:
                    if hasattr(result, "close"):
                        result.close()
            except Exception as exc:  # as werkzeug: log it, answer 500
                if self.server.passthrough_errors:
                    raise
                print(f"embedded: error on {self.command} {self.path}: {exc!r}", file=sys.stderr, flush=True)
                answer = {"status": "500 INTERNAL SERVER ERROR", "headers": [("Content-Type", "text/plain")]}
                chunks = [b"Internal Server Error"]
                self.close_connection = True
            payload = b"".join(chunks)
            code_text, _, reason = answer["status"].partition(" ")
            code = int(code_text)
            answer["sent"] = True
            self.send_response(code, reason)
            names = set()
            for name, value in answer["headers"]:
                self.send_header(name, value)
                names.add(name.lower())
            bodiless = self.command == "HEAD" or 100 <= code < 200 or code in (204, 304)
            if "content-length" not in names and not bodiless:
                self.send_header("Content-Length", str(len(payload)))
            if self.close_connection:
                self.send_header("Connection", "close")
            # end_headers(), with the body in the same write
            self._headers_buffer.append(b"\r\n")
            if payload and not bodiless:
                self._headers_buffer.append(payload)
            self.flush_headers()

    return KeepAliveRequestHandler
