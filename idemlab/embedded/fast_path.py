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
- for those DynamoDB actions, when the request is one werkzeug would read trivially (a
  JSON POST to `/`, no query, no content encoding, a plain Host), moto's handler gets a
  request object with the few attributes it reads, filled in directly, instead of
  werkzeug's (whose form, values and URL parsing cost ~20 % of the request's CPU in
  moto and give empty results for such a request);
- connections stay open (HTTP/1.1 keep-alive), one thread per connection, and a plain
  HTTP/1.1 request's line and headers are read in one pass (the standard library's
  header parser takes every other request);
- a condition's parse is reused with the request's own values (cached_condition_parses);
- no access-log line per request (server errors are still logged).

Measured with the same boto3-signed requests sent as raw HTTP (bench/embedded.py), the
server's own CPU per PutItem went from ~1.2-1.4 ms (plain moto) to ~0.25 ms; a boto3
client spends ~0.5 ms of CPU of its own per call, which is why the bench prints both.

What stays exactly as it was: the loopback Host/Origin guard runs first on every request,
every request to DynamoDB is still serialised by dynamodb_atomic's lock, and anything
the short path does not recognise takes moto's full route.
"""

from __future__ import annotations

import http.client
import io
import os
import re
import sys
from urllib.parse import unquote

from idemlab.embedded.patching import replace_once, wrap

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


def lean_json_errors() -> None:
    """moto's JSON error (`JsonRESTError`, the base of every DynamoDB error such as a
    refused condition) first renders an XML error document with xmltodict, then replaces
    it with its JSON one: ~14 % of a refused conditional write's CPU in moto. The same
    attributes, set without the discarded XML."""
    import json

    from moto.core.exceptions import JsonRESTError
    from werkzeug.exceptions import HTTPException

    def __init__(self, error_type: str, message: str, _: str = "", **__) -> None:
        HTTPException.__init__(self)
        self.error_type = error_type
        self.message = message
        self.description = json.dumps({"__type": self.error_type, "message": self.message})
        self.content_type = "application/json"

    replace_once(JsonRESTError, "__init__", __init__)


def cached_condition_parses() -> None:
    """moto parses a write's condition twice (the handler to check its names, the table
    to evaluate it) and again on every request: ~1/3 of a conditional write's CPU. The
    parse depends on the expression, the names and, of the values, only on which names
    exist and each one's type: a value becomes an `AttributeValue` leaf of the tree. So a
    successful parse is kept per (expression, names, value names and types), made with
    placeholder values, and each later parse gets a copy of that tree with the request's
    own values in its leaves (moto never changes a tree while evaluating it). A parse that
    fails is never kept: moto's own parse raises its own error every time."""
    from moto.dynamodb.comparisons import AttributeValue, ConditionExpressionParser, Func, Op

    # Only ever read and written inside DynamoHandler.call_action, under dynamodb_atomic's lock.
    parses: dict = {}

    def bound(node, leaves: dict, holders: set):
        """The tree with the request's values in its placeholder leaves; the branches
        without one (paths, functions of paths) are shared, not copied."""
        if isinstance(node, (list, tuple)):
            return type(node)(bound(child, leaves, holders) for child in node)
        if isinstance(node, AttributeValue):
            return leaves.get(id(node.value), node)
        if not isinstance(node, (Op, Func)) or id(node) not in holders:
            return node
        copy = object.__new__(type(node))
        copy.__dict__ = {name: bound(value, leaves, holders) for name, value in node.__dict__.items()}
        return copy

    def holding(node, holders: set) -> bool:
        """Note every Op and Func above a placeholder leaf in `holders`."""
        if isinstance(node, (list, tuple)):
            return any([holding(child, holders) for child in node])
        if isinstance(node, AttributeValue):
            return True
        if isinstance(node, (Op, Func)) and any([holding(value, holders) for value in node.__dict__.values()]):
            holders.add(id(node))
            return True
        return False

    def parse(original, self):
        expression, names, values = self.condition_expression, self.expression_attribute_names, self.expression_attribute_values
        if not (
            isinstance(expression, str)
            and expression
            and isinstance(names or {}, dict)
            and all(isinstance(name, str) for name in (names or {}).values())
            and isinstance(values or {}, dict)
            and all(isinstance(value, dict) and len(value) == 1 for value in (values or {}).values())
        ):
            return original(self)
        key = (expression, None if names is None else tuple(names.items()), None if values is None else tuple((name, *value) for name, value in values.items()))
        entry = parses.get(key)
        if entry is None:
            op = original(self)  # moto's parse of the request's own values, errors and all
            slots = {name: object() for name in values or ()}
            placeholder = ConditionExpressionParser(expression, names, {name: {value_type: slots[name]} for name, value_type in key[2] or ()})
            if len(parses) >= 1024:
                parses.clear()
            tree, holders = original(placeholder), set()
            holding(tree, holders)
            found = (placeholder.expr_attr_names_found, placeholder.expr_attr_values_found)
            parses[key] = (tree, holders, [(slot, name) for name, slot in slots.items()], *found)
            return op
        tree, holders, slots, names_found, values_found = entry
        self.expr_attr_names_found.extend(names_found)
        self.expr_attr_values_found.extend(values_found)
        return bound(tree, {id(slot): AttributeValue(values[name]) for slot, name in slots}, holders)

    wrap(ConditionExpressionParser, "parse")(parse)


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
        request = _lite_request(environ, recorder) if dispatch == DynamoHandler.dispatch else None
        if request is None:
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
    from moto.core.request import PRESERVED_HEADER_NAMES_ENVIRON_KEY
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

        def handle_one_request(self) -> None:
            """An HTTP/1.1 request with plain headers is read here in one pass. Any other
            (HTTP/1.0, a malformed or overlong line, folded or underscored header names,
            Transfer-Encoding, Expect) gets the standard library's parser and werkzeug's
            environ, as before. Both end in run_wsgi below."""
            try:
                line = self.rfile.readline(65537)
                if not line:
                    self.close_connection = True
                    return
                parts = line.split()
                if len(line) > 65536 or len(parts) != 3 or parts[2] != b"HTTP/1.1" or not line.endswith(b"\r\n"):
                    self.raw_requestline = line
                    if len(line) > 65536:
                        self.requestline = self.request_version = self.command = ""
                        self.send_error(414)
                        return
                    if self.parse_request():
                        self.run_wsgi()
                        self.wfile.flush()
                    return
                self._plain_request(line, parts)
            except TimeoutError:
                self.close_connection = True

        def _plain_request(self, line: bytes, parts: list[bytes]) -> None:
            self.command, self.path, self.request_version = parts[0].decode("latin-1"), parts[1].decode("latin-1"), "HTTP/1.1"
            self.requestline = line.decode("latin-1").rstrip("\r\n")
            lines: list[bytes] = []
            while True:
                header = self.rfile.readline(65537)
                if header in (b"\r\n", b"\n", b""):
                    break
                if len(header) > 65536 or len(lines) >= 100:  # http.client's limits
                    self.close_connection = True
                    self.send_error(431)
                    return
                lines.append(header)
            fields: list[tuple[str, str]] | None = []
            for header in lines:
                name, colon, value = header.decode("latin-1").partition(":")
                if not colon or not name or name != name.strip() or "_" in name or name.lower() in ("transfer-encoding", "expect"):
                    fields = None
                    break
                fields.append((name, value.strip(" \t\r\n")))
            if fields is None:  # the standard parser's reading of the same headers
                self.headers = http.client.parse_headers(io.BytesIO(b"".join(lines) + b"\r\n"))
                self.close_connection = self.headers.get("Connection", "").lower() == "close"
                self.run_wsgi()
                self.wfile.flush()
                return
            self.headers = _PlainHeaders(fields)
            self.close_connection = self.headers.get("Connection", "").lower() == "close"
            self.run_wsgi(self._plain_environ(fields))

        def _plain_environ(self, fields: list[tuple[str, str]]) -> dict:
            """The environ werkzeug's make_environ (and moto's) builds for such a request."""
            path, _, query = self.path.partition("?")
            if not path.startswith("/") or path.startswith("//"):  # werkzeug's own reading of these
                return self.make_environ()
            environ = {
                "wsgi.version": (1, 0),
                "wsgi.url_scheme": "http",
                "wsgi.input": self.rfile,
                "wsgi.errors": sys.stderr,
                "wsgi.multithread": self.server.multithread,
                "wsgi.multiprocess": self.server.multiprocess,
                "wsgi.run_once": False,
                "werkzeug.socket": self.connection,
                "SERVER_SOFTWARE": self.server_version,
                "REQUEST_METHOD": self.command,
                "SCRIPT_NAME": "",
                "PATH_INFO": _wsgi_path(path),
                "QUERY_STRING": query,
                "REQUEST_URI": self.path,
                "RAW_URI": self.path,
                "REMOTE_ADDR": self.client_address[0],
                "REMOTE_PORT": self.client_address[1],
                "SERVER_NAME": self.server.server_address[0],
                "SERVER_PORT": str(self.server.server_address[1]),
                "SERVER_PROTOCOL": "HTTP/1.1",
                PRESERVED_HEADER_NAMES_ENVIRON_KEY: {},
            }
            for name, value in fields:
                key = name.upper().replace("-", "_")
                if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                    key = "HTTP_" + key
                    if key in environ:
                        value = f"{environ[key]},{value}"
                environ[key] = value
            return environ

        def run_wsgi(self, environ: dict | None = None) -> None:
            if environ is None and "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                self.close_connection = True
                return super().run_wsgi()
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                self.close_connection = True
                self.send_error(400, "invalid Content-Length")
                return
            if environ is None:
                if self.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
                    self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                environ = self.make_environ()
            self.environ = environ
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


class _PlainHeaders:
    """A plain request's headers, for the few lookups the keep-alive handler makes."""

    def __init__(self, fields: list[tuple[str, str]]):
        self._fields = fields

    def get(self, name: str, default=None):
        name = name.lower()
        for key, value in self._fields:
            if key.lower() == name:
                return value
        return default

    def items(self) -> list[tuple[str, str]]:
        return list(self._fields)

    def keys(self) -> list[str]:
        return [key for key, _ in self._fields]


def _wsgi_path(path: str) -> str:
    """PATH_INFO as werkzeug sets it: percent-decoded, as latin-1 text of its UTF-8."""
    if "%" in path:
        path = unquote(path)
    return path.encode().decode("latin-1") if not path.isascii() else path


# What a JSON-protocol request to `/` carries that werkzeug's Request would work out for
# moto: these content types are never form data, so its form, files and values are empty.
JSON_CONTENT_TYPES = ("application/x-amz-json-1.0", "application/x-amz-json-1.1")
_PLAIN_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


class _LiteRequest:
    """The attributes of moto's Request that `BaseResponse.setup_class`, its parameter
    parser and its IAM bookkeeping read, for a request werkzeug would read the same way:
    a POST to `/` with no query string, a JSON content type, no content encoding, a plain
    Host other than port 80. Any other request gets werkzeug's Request (`_lite_request`)."""

    from_wsgi_server = True
    path = raw_path = "/"

    def __init__(self, environ: dict, body: bytes):
        from moto.core.request import EnvironHeaders
        from werkzeug.datastructures import CombinedMultiDict, ImmutableMultiDict

        self.environ = environ
        self.method = environ["REQUEST_METHOD"]
        self.headers = EnvironHeaders(environ)
        self.content_type = environ.get("CONTENT_TYPE")
        self.content_encoding = None
        self.data = body
        self.form = self.files = ImmutableMultiDict()
        self.values = CombinedMultiDict([ImmutableMultiDict(), self.form])
        self.raw_url = f"http://{environ['HTTP_HOST']}/"
        self.query_string = b""


def _lite_request(environ: dict, recorder) -> _LiteRequest | None:
    host = environ.get("HTTP_HOST", "")
    if (
        recorder._user_enabled  # it reads the body from the stream itself
        or environ.get("QUERY_STRING")
        or environ.get("CONTENT_TYPE") not in JSON_CONTENT_TYPES
        or "HTTP_CONTENT_ENCODING" in environ
        or "HTTP_TRANSFER_ENCODING" in environ
        or environ.get("wsgi.url_scheme") != "http"
        or not _PLAIN_HOST.match(host)
        or host.endswith(":80")
    ):
        return None
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return _LiteRequest(environ, body)
