"""Google's published discovery documents, as google-api-python-client ships them
(googleapiclient/discovery_cache/documents; the version is pinned in requirements-dev.txt), and a
small validator of JSON answers against their schemas, strict where Google's REST output is:

- a field the schema does not define fails (a map, `additionalProperties`, takes any key);
- int64/uint64 fields are JSON strings of digits, int32/uint32 JSON integers, doubles and floats
  JSON numbers (or "NaN", "Infinity", "-Infinity"), booleans JSON booleans; enum values must be
  among the schema's; google-datetime and google-duration strings have their RFC 3339 / "1.5s" form;
- a google.protobuf.Any (an object whose values the document describes as "Contains field @type
  with type URL") must carry "@type", and the rest is checked against the schema ANY_TYPES names
  for that type URL: a type URL it does not name fails, so a new one gets mapped;
- a field is required only where the document says `"required": true` (none of the schemas used
  here does: Google's "Required." in a description is about requests).

Errors follow Google's JSON error format (https://cloud.google.com/apis/design/errors):
{"error": {"code": HTTP status, "message", "status": the google.rpc.Code name, "details": [Any]}},
the discovery document's google.rpc.Status plus the `status` name, which must be one of
google.rpc.Code's (googleapis-common-protos) and agree with `code` per that enum's HTTP mapping.
"""
import functools
import importlib.metadata
import importlib.resources
import json
import re

from google.rpc import code_pb2

PACKAGE = "google-api-python-client"
DOCUMENTS = importlib.resources.files("googleapiclient.discovery_cache") / "documents"

# type URL of an Any -> (discovery document, schema) of the message it holds
ANY_TYPES = {
    "type.googleapis.com/google.api.serviceusage.v1.BatchEnableServicesResponse":
        ("serviceusage.v1", "BatchEnableServicesResponse"),
    "type.googleapis.com/google.api.serviceusage.v1beta1.ServiceIdentity": ("serviceusage.v1beta1", "ServiceIdentity"),
    # google.rpc.ErrorInfo as a discovery document defines it (the APIs above only say "details: Any")
    "type.googleapis.com/google.rpc.ErrorInfo": ("networkconnectivity.v1", "GoogleRpcErrorInfo"),
}
# where google.rpc.Status comes from when the method's own document does not define it (orgpolicy.v2)
STATUS_DOCUMENT = "serviceusage.v1"
# google.rpc.Code -> the HTTP status Google's REST answers with it (google/rpc/code.proto's mapping)
HTTP_STATUS = {"OK": 200, "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400, "DEADLINE_EXCEEDED": 504,
               "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401,
               "RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400, "ABORTED": 409, "OUT_OF_RANGE": 400,
               "UNIMPLEMENTED": 501, "INTERNAL": 500, "UNAVAILABLE": 503, "DATA_LOSS": 500}

INT64 = re.compile(r"-?[0-9]+")
UINT64 = re.compile(r"[0-9]+")
DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)")
DURATION = re.compile(r"-?\d+(\.\d{1,9})?s")
BASE64 = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
INT32_RANGE = {"int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1)}


def version():
    return importlib.metadata.version(PACKAGE)


@functools.cache
def document(name):
    """A discovery document by its file name without .json, e.g. "monitoring.v3"."""
    return json.loads((DOCUMENTS / f"{name}.json").read_text())


def label(name):
    """ "monitoring.v3 (revision 20261101, google-api-python-client 2.202.0)" """
    return f"{name} (revision {document(name)['revision']}, {PACKAGE} {version()})"


def _methods(resources):
    for resource in resources.values():
        yield from resource.get("methods", {}).values()
        yield from _methods(resource.get("resources", {}))


@functools.cache
def method(doc, method_id):
    """The method `method_id` (e.g. "monitoring.projects.timeSeries.list") of a document."""
    found = [m for m in _methods(document(doc).get("resources", {})) if m["id"] == method_id]
    if not found:
        raise KeyError(f"{doc} has no method {method_id}")
    return found[0]


def response_problems(answer, doc, method_id):
    """What in `answer` does not fit the response schema of the method: [] when it fits."""
    response = method(doc, method_id).get("response")
    if response is None:  # google.protobuf.Empty: Google answers {}
        return [] if answer == {} else [f"$: {method_id} answers an empty object, not {answer!r}"]
    return Validator(doc).check(answer, response, "$")


def error_problems(answer, doc, http_status=None):
    """What in `answer` does not fit Google's JSON error format (google.rpc.Status) of an API whose
    discovery document is `doc`: [] when it fits. `http_status`: what the answer was served with."""
    status_doc = doc if "Status" in document(doc)["schemas"] else STATUS_DOCUMENT
    status = dict(document(status_doc)["schemas"]["Status"])
    status["properties"] = {**status["properties"],
                            "status": {"type": "string", "enum": list(code_pb2.Code.keys())}}
    envelope = {"type": "object", "properties": {"error": {**status, "required": True}}}
    problems = Validator(status_doc).check(answer, envelope, "$")
    error = answer.get("error") if isinstance(answer, dict) else None
    if problems or not isinstance(error, dict):
        return problems
    for field in ("code", "message", "status"):
        if field not in error:
            problems.append(f"$.error: no {field}")
    if "status" in error and error.get("code") != HTTP_STATUS.get(error["status"]):
        problems.append(f"$.error: code {error.get('code')} is not the HTTP status of {error['status']} "
                        f"({HTTP_STATUS.get(error['status'])})")
    if http_status is not None and error.get("code") != http_status:
        problems.append(f"$.error.code {error.get('code')} but served with HTTP {http_status}")
    return problems


def is_any(schema):
    extra = schema.get("additionalProperties")
    return (schema.get("type") == "object" and not schema.get("properties") and isinstance(extra, dict)
            and extra.get("type") == "any" and "@type" in extra.get("description", ""))


class Validator:
    def __init__(self, doc):
        self.doc = doc

    def check(self, value, schema, where):
        if "$ref" in schema:
            ref = schema["$ref"]
            schemas = document(self.doc)["schemas"]
            if ref not in schemas:
                return [f"{where}: {self.doc} has no schema {ref}"]
            return self.check(value, schemas[ref], where)
        kind, fmt = schema.get("type"), schema.get("format")
        if kind == "any":
            return []
        if value is None:
            return [f"{where}: null (Google leaves an unset field out)"]
        if kind == "object":
            return self.check_object(value, schema, where)
        if kind == "array":
            if not isinstance(value, list):
                return [f"{where}: {type(value).__name__}, not an array"]
            items = schema.get("items", {})
            return [p for i, item in enumerate(value) for p in self.check(item, items, f"{where}[{i}]")]
        if kind == "string":
            return self.check_string(value, schema, fmt, where)
        if kind == "integer":
            if not isinstance(value, int) or isinstance(value, bool):
                return [f"{where}: {value!r} is not a JSON integer ({fmt})"]
            low, high = INT32_RANGE.get(fmt, (None, None))
            if low is not None and not low <= value <= high:
                return [f"{where}: {value} out of {fmt} range"]
            return []
        if kind == "number":
            if isinstance(value, bool) or not (isinstance(value, (int, float))
                                                or value in ("NaN", "Infinity", "-Infinity")):
                return [f"{where}: {value!r} is not a JSON number ({fmt})"]
            return []
        if kind == "boolean":
            return [] if isinstance(value, bool) else [f"{where}: {value!r} is not a JSON boolean"]
        return [f"{where}: schema type {kind!r} unknown to this validator"]

    def check_object(self, value, schema, where):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        if is_any(schema):
            return self.check_any(value, where)
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties")
        problems = [f"{where}: no {name} (required)" for name, field in properties.items()
                    if field.get("required") is True and name not in value]
        for key, item in value.items():
            if key in properties:
                problems += self.check(item, properties[key], f"{where}.{key}")
            elif extra is not None:
                problems += self.check(item, extra, f"{where}[{key!r}]")
            else:
                problems.append(f"{where}.{key}: not a field of {schema.get('id', 'this object')} in {self.doc}")
        return problems

    def check_any(self, value, where):
        type_url = value.get("@type")
        if not isinstance(type_url, str):
            return [f"{where}: a google.protobuf.Any without its @type"]
        if type_url not in ANY_TYPES:
            return [f"{where}: no schema for @type {type_url} (name it in ANY_TYPES, tests/google_schemas.py)"]
        doc, name = ANY_TYPES[type_url]
        rest = {k: v for k, v in value.items() if k != "@type"}
        return Validator(doc).check(rest, {"$ref": name}, f"{where}<{name}>")

    def check_string(self, value, schema, fmt, where):
        if not isinstance(value, str):
            why = " (int64 is a JSON string in Google's REST)" if fmt in ("int64", "uint64") else ""
            return [f"{where}: {value!r} is not a JSON string{why}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{where}: {value!r} is not one of {schema['enum']}"]
        pattern = {"int64": INT64, "uint64": UINT64, "google-datetime": DATETIME, "date-time": DATETIME,
                   "google-duration": DURATION, "byte": BASE64}.get(fmt)
        if pattern is not None and not pattern.fullmatch(value):
            return [f"{where}: {value!r} is not a {fmt} string"]
        return []
