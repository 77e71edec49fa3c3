"""A kusion runtime for RabbitMQ, written in Python and built into a WebAssembly component.

It serves five resource types, each managed through the RabbitMQ management HTTP API:

    RabbitMQVhost     {name, description?}
    RabbitMQExchange  {vhost, name, type, durable?, autoDelete?, internal?, arguments?}
    RabbitMQQueue     {vhost, name, durable?, autoDelete?, arguments?}
    RabbitMQBinding   {vhost, source, destination, destinationType?, routingKey?, arguments?}
    RabbitMQUser      {name, password, tags?}

Every verb takes and returns JSON text shaped like the kusion-sdk types (sdk/wit/plugin.wit).
Absent is a value: reading a missing object answers {"resource": null}, and deleting one that is
already gone succeeds. The only way out of the sandbox is wasi:http, to the hosts the operator
granted (plugins.settings.rabbitmq.grants.hosts).
"""

import base64
import hashlib
import json
from urllib.parse import quote

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import outgoing_handler, types
from wit_world.imports.streams import StreamError_Closed

VERSION = "0.1.0"

# Attributes whose change RabbitMQ cannot apply in place: the kernel replaces the object instead
# (delete, then create). A binding is nothing but its identity.
IMMUTABLE = {
    "RabbitMQVhost": ["name"],
    "RabbitMQExchange": ["vhost", "name", "type", "durable", "autoDelete", "internal", "arguments"],
    "RabbitMQQueue": ["vhost", "name", "durable", "autoDelete", "arguments"],
    "RabbitMQBinding": ["vhost", "source", "destination", "destinationType", "routingKey", "arguments"],
    "RabbitMQUser": ["name"],
}


class PluginError(Exception):
    """A kusion PluginError: kind is one of invalidInput, unavailable, rejected, conflict, ..."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def encode(self):
        retryable = self.kind in ("unavailable", "timeout")
        return json.dumps({"kind": self.kind, "message": self.message, "retryable": retryable})


# --- HTTP through wasi:http -----------------------------------------------------------------

class Api:
    """The management API at `endpoint` (http://host:port), with basic auth."""

    def __init__(self, endpoint, username, password):
        scheme, _, authority = endpoint.partition("://")
        if scheme not in ("http", "https") or not authority:
            raise PluginError("invalidInput", f"endpoint must be http(s)://HOST:PORT, got {endpoint!r}")
        self.https = scheme == "https"
        self.authority = authority.rstrip("/")
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self.auth = f"Basic {token}".encode()

    def call(self, rid, method, path, body=None):
        """One request; returns (status, parsed JSON or None). Transport failures raise."""
        headers = [("authorization", self.auth), ("accept", b"application/json")]
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers += [("content-type", b"application/json"), ("content-length", str(len(data)).encode())]
        request = types.OutgoingRequest(types.Fields.from_list(headers))
        request.set_method(method)
        request.set_scheme(types.Scheme_Https() if self.https else types.Scheme_Http())
        request.set_authority(self.authority)
        request.set_path_with_query("/api" + path)
        # Only a request with data gets a body: an empty one would still go out chunked, and
        # RabbitMQ's web server drops the connection when it answers 404 to such a DELETE.
        outgoing = request.body() if data is not None else None
        where = f"{method_name(method)} {self.authority}/api{path}"
        try:
            # Send first, then stream the body: the host buffers little of it before sending.
            pending = outgoing_handler.handle(request, None)
            if outgoing is not None:
                with outgoing.write() as stream:
                    # A blocking write takes at most 4 KiB.
                    for at in range(0, len(data), 4096):
                        stream.blocking_write_and_flush(data[at:at + 4096])
                types.OutgoingBody.finish(outgoing, None)
            # WASI resources must be dropped children first (a pollable before its future, a
            # stream before its body): `with` drops them in that order, not the garbage collector.
            with pending:
                with pending.subscribe() as ready:
                    ready.block()
                answer = pending.get()
        except Err as e:
            raise PluginError("unavailable", f"{rid}: {where} failed: {e.value}")
        # option<result<result<response, error-code>>>: the inner error is the transport's.
        if answer is None or isinstance(answer, Err) or isinstance(answer.value, Err):
            why = answer.value.value if answer is not None and not isinstance(answer, Err) else answer
            raise PluginError("unavailable", f"{rid}: {where} failed: {why}")
        with answer.value.value as response:
            status = response.status()
            text = read_body(response)
        return status, (json.loads(text) if text else None)

    def get(self, rid, path):
        """The object at `path`, or None when RabbitMQ says 404."""
        status, doc = self.call(rid, types.Method_Get(), path)
        if status == 404:
            return None
        check(rid, "GET", path, status, doc)
        return doc

    def put(self, rid, path, body):
        status, doc = self.call(rid, types.Method_Put(), path, body)
        check(rid, "PUT", path, status, doc)

    def post(self, rid, path, body):
        status, doc = self.call(rid, types.Method_Post(), path, body)
        check(rid, "POST", path, status, doc)

    def delete(self, rid, path):
        """Delete; a 404 means it is already gone, which is what was asked."""
        status, doc = self.call(rid, types.Method_Delete(), path)
        if status != 404:
            check(rid, "DELETE", path, status, doc)


def method_name(method):
    return type(method).__name__.removeprefix("Method_").upper()


def read_body(response):
    chunks = []
    with response.consume() as body, body.stream() as stream:
        while True:
            try:
                chunks.append(stream.blocking_read(64 * 1024))
            except Err as e:
                if isinstance(e.value, StreamError_Closed):
                    break
                raise PluginError("unavailable", f"reading a response failed: {e.value}")
    return b"".join(chunks).decode()


def check(rid, method, path, status, doc):
    if 200 <= status < 300:
        return
    reason = (doc or {}).get("reason") or (doc or {}).get("error") or ""
    kind = "unavailable" if status >= 500 else "rejected"
    if status == 400:
        kind = "invalidInput"
    raise PluginError(kind, f"{rid}: RabbitMQ answered {status} to {method} /api{path}: {reason}")


# --- resource types -------------------------------------------------------------------------

def required(resource, key):
    value = resource["attributes"].get(key)
    if not isinstance(value, str) or not value:
        raise PluginError("invalidInput", f"{resource['id']}: attribute `{key}` (a non-empty string) is required")
    return value


def q(text):
    """A path segment: '/' (the default vhost) must be sent as %2F."""
    return quote(text, safe="")


def vhost_path(r):
    return f"/vhosts/{q(required(r, 'name'))}"


def object_path(r, kind):
    return f"/{kind}/{q(required(r, 'vhost'))}/{q(required(r, 'name'))}"


def binding_path(r):
    a = r["attributes"]
    dest_type = a.get("destinationType", "queue")
    if dest_type not in ("queue", "exchange"):
        raise PluginError("invalidInput", f"{r['id']}: `destinationType` must be queue or exchange, got {dest_type!r}")
    d = "q" if dest_type == "queue" else "e"
    return f"/bindings/{q(required(r, 'vhost'))}/e/{q(required(r, 'source'))}/{d}/{q(required(r, 'destination'))}"


def password_matches(password, password_hash):
    """RabbitMQ's default hash: base64(salt[4] + sha256(salt + password))."""
    try:
        raw = base64.b64decode(password_hash)
    except ValueError:
        return False
    salt = raw[:4]
    return raw[4:] == hashlib.sha256(salt + password.encode()).digest()


class Kind:
    """How one resource type maps onto the API: where it lives, what is sent, what is read."""

    def __init__(self, path, body, live):
        self.path, self.body, self.live = path, body, live


def user_live(doc, r):
    tags = doc.get("tags", [])
    if isinstance(tags, str):
        tags = [t for t in tags.split(",") if t]
    planned_tags = r["attributes"].get("tags", [])
    # Tags are a set: the planned order is kept when the members agree.
    live = {"name": doc["name"], "tags": planned_tags if sorted(planned_tags) == sorted(tags) else sorted(tags)}
    # The password cannot be read back, only checked: a changed one shows as a difference.
    planned = r["attributes"].get("password")
    if isinstance(planned, str) and password_matches(planned, doc.get("password_hash", "")):
        live["password"] = planned
    return live


KINDS = {
    "RabbitMQVhost": Kind(
        vhost_path,
        lambda a: {"description": a.get("description", "")},
        lambda doc, r: {"name": doc["name"], "description": doc.get("description", "")},
    ),
    "RabbitMQExchange": Kind(
        lambda r: object_path(r, "exchanges"),
        lambda a: {
            "type": a.get("type", "direct"),
            "durable": a.get("durable", True),
            "auto_delete": a.get("autoDelete", False),
            "internal": a.get("internal", False),
            "arguments": a.get("arguments", {}),
        },
        lambda doc, r: {
            "vhost": doc["vhost"], "name": doc["name"], "type": doc["type"],
            "durable": doc["durable"], "autoDelete": doc["auto_delete"],
            "internal": doc["internal"], "arguments": doc.get("arguments", {}),
        },
    ),
    "RabbitMQQueue": Kind(
        lambda r: object_path(r, "queues"),
        lambda a: {
            "durable": a.get("durable", True),
            "auto_delete": a.get("autoDelete", False),
            "arguments": a.get("arguments", {}),
        },
        lambda doc, r: {
            "vhost": doc["vhost"], "name": doc["name"], "durable": doc["durable"],
            "autoDelete": doc["auto_delete"], "arguments": doc.get("arguments", {}),
        },
    ),
    "RabbitMQUser": Kind(
        lambda r: f"/users/{q(required(r, 'name'))}",
        lambda a: {"password": a.get("password", ""), "tags": ",".join(a.get("tags", []))},
        user_live,
    ),
}


def shaped_like(resource, live):
    """`resource` with the live values of the attributes it sets (the ones it manages), so the
    kernel's diff compares like with like; attributes left to RabbitMQ's defaults are not shown."""
    out = dict(resource)
    attributes = dict(resource["attributes"])
    for key in attributes:
        if key in live:
            attributes[key] = live[key]
        elif key == "password":
            attributes[key] = None
    out["attributes"] = attributes
    return out


def validate(r):
    kind = r.get("type")
    if kind not in IMMUTABLE:
        raise PluginError("invalidInput", f"{r.get('id')}: unknown resource type {kind!r}")
    if kind == "RabbitMQBinding":
        binding_path(r)
    else:
        KINDS[kind].path(r)
    if kind == "RabbitMQUser":
        required(r, "password")
        if not isinstance(r["attributes"].get("tags", []), list):
            raise PluginError("invalidInput", f"{r['id']}: `tags` must be a list of strings")


class Rabbit:
    def __init__(self):
        self.api = None

    def client(self):
        if self.api is None:
            raise PluginError("invalidInput", "the rabbitmq runtime is not configured: set `endpoint`, `username`, `password`")
        return self.api

    def live(self, r):
        """The live object shaped like `r`, or None when absent."""
        api = self.client()
        if r["type"] == "RabbitMQBinding":
            return self.live_binding(api, r)
        kind = KINDS[r["type"]]
        doc = api.get(r["id"], kind.path(r))
        return None if doc is None else shaped_like(r, kind.live(doc, r))

    def live_binding(self, api, r):
        found = self.find_binding(api, r)
        if found is None:
            return None
        return shaped_like(r, {
            "vhost": found["vhost"], "source": found["source"], "destination": found["destination"],
            "destinationType": found["destination_type"], "routingKey": found["routing_key"],
            "arguments": found.get("arguments", {}),
        })

    def find_binding(self, api, r):
        a = r["attributes"]
        listed = api.get(r["id"], binding_path(r)) or []
        for b in listed:
            if b["routing_key"] == a.get("routingKey", "") and b.get("arguments", {}) == a.get("arguments", {}):
                return b
        return None

    def write(self, r):
        api = self.client()
        a = r["attributes"]
        if r["type"] == "RabbitMQBinding":
            if self.find_binding(api, r) is None:
                api.post(r["id"], binding_path(r), {"routing_key": a.get("routingKey", ""), "arguments": a.get("arguments", {})})
        else:
            kind = KINDS[r["type"]]
            api.put(r["id"], kind.path(r), kind.body(a))

    def remove(self, r):
        api = self.client()
        if r["type"] == "RabbitMQBinding":
            found = self.find_binding(api, r)
            if found is not None:
                # properties_key comes URL-encoded already.
                api.delete(r["id"], binding_path(r) + "/" + found["properties_key"])
        else:
            api.delete(r["id"], KINDS[r["type"]].path(r))


RABBIT = Rabbit()


# --- the runtime interface (sdk/wit/plugin.wit) ---------------------------------------------

def serve(verb):
    """Run `verb`, turning every failure into the JSON PluginError the host expects."""
    try:
        return verb()
    except PluginError as e:
        raise Err(e.encode())
    except Err:
        raise
    except Exception as e:  # a bug here must still reach the operator as a message
        raise Err(PluginError("internal", f"{type(e).__name__}: {e}").encode())


class Runtime(exports.Runtime):
    def describe(self):
        return json.dumps({
            "name": "rabbitmq",
            "version": VERSION,
            "abi": {"major": 1, "minor": 0},
            "resourceTypes": list(IMMUTABLE),
            "capabilities": {"dryRun": True, "watch": False, "import": True, "sensitiveFields": True},
        })

    def configure(self, config):
        def run():
            c = json.loads(config) or {}
            if not isinstance(c, dict) or not isinstance(c.get("endpoint"), str):
                raise PluginError("invalidInput", "rabbitmq configuration: `endpoint` (http://HOST:PORT) is required")
            RABBIT.api = Api(c["endpoint"], c.get("username", "guest"), c.get("password", "guest"))
        serve(run)

    def apply(self, request):
        def run():
            req = json.loads(request)
            planned = req["planned"]
            validate(planned)
            # A dry-run answers with the planned object and touches nothing.
            if not req.get("dryRun"):
                # The kernel planned a replacement when an IMMUTABLE attribute changed; carrying
                # it out is the runtime's job: delete the old object, then create the new one.
                prior = req.get("prior")
                if prior and any(
                    prior["attributes"].get(k) != planned["attributes"].get(k) for k in IMMUTABLE[planned["type"]]
                ):
                    RABBIT.remove(prior)
                RABBIT.write(planned)
            return json.dumps({
                "resource": planned,
                "sensitivePaths": ["password"] if planned["type"] == "RabbitMQUser" else [],
                "requiresReplace": IMMUTABLE[planned["type"]],
            })
        return serve(run)

    def read(self, request):
        def run():
            req = json.loads(request)
            like = req.get("prior") or req.get("planned")
            if like is None:
                raise PluginError("invalidInput", "read needs a prior or a planned resource")
            validate(like)
            return json.dumps({"resource": RABBIT.live(like), "sensitivePaths": sensitive(like)})
        return serve(run)

    def import_(self, request):
        def run():
            req = json.loads(request)
            like = req["planned"]
            # An import id names the object as vhost/name (or name, for vhosts and users).
            if req.get("importId"):
                vhost, _, name = req["importId"].rpartition("/")
                like = dict(like, attributes=dict(like["attributes"], name=name))
                if vhost:
                    like["attributes"]["vhost"] = vhost
            validate(like)
            return json.dumps({"resource": RABBIT.live(like), "sensitivePaths": sensitive(like)})
        return serve(run)

    def delete(self, request):
        def run():
            resource = json.loads(request)["resource"]
            validate(resource)
            RABBIT.remove(resource)
        serve(run)

    def target(self, object):
        # One broker per configuration.
        return None

    def watch(self, request):
        raise Err(PluginError("unsupported", "the rabbitmq runtime does not watch: objects are ready once applied").encode())

    def poll(self, handle, timeout_ms):
        raise Err(PluginError("invalidInput", f"no open watch {handle}").encode())

    def unwatch(self, handle):
        pass


def sensitive(resource):
    return ["password"] if resource["type"] == "RabbitMQUser" else []
