"""serve-page: GET /app?view=P -> the page's HTML.

The page itself registers its visit (POST to inc-counter) and shows its total (from get-counter),
so this function needs no access to Firestore or Pub/Sub. The sibling functions' URLs are
settings: relative paths work wherever one host routes all three, as the Cloud Functions URL does.

With PAGE_EMBEDS_COUNT=1 it also embeds the page's total in the page's config, read as get-counter
reads it (totals.py: the same cache and rules), so that the page needs no first read of get-counter:
a visit is then two requests (the page, inc-counter) instead of three. Only then does it load the
Firestore client. A total it cannot get never fails the page: the page is served without it, and
reads it from get-counter as it does by default.

The page goes gzipped to a client whose Accept-Encoding takes gzip (every browser): the visitor's
download is internet egress, billed by the byte, and Cloud Run's front end does not compress an answer
by itself. Each page text is compressed once and kept: compressing costs about as much CPU as the rest
of a page request (scripts/benchmark-response-bytes measures both).
"""
import base64
import functools
import gzip
import hashlib
import html
import json
import os
import re
import string
import urllib.parse
from pathlib import Path

import functions_framework

from common import check_request, log, page_from, trace_of

PAGE_EMBEDS_COUNT = os.environ.get("PAGE_EMBEDS_COUNT", "0") == "1"
if PAGE_EMBEDS_COUNT:
    import totals  # with the Firestore client: as the instance starts, not by its first request

INC_COUNTER_URL = os.environ.get("INC_COUNTER_URL", "/inc-counter")
GET_COUNTER_URL = os.environ.get("GET_COUNTER_URL", "/get-counter")
# The page reads its count every COUNTER_REFRESH_SECONDS, or get-counter's CACHE_TTL_SECONDS when
# longer (a read sooner would mostly get the same cached total: at 10,000 visits/s the open pages'
# reads, not the visits, would dominate), with up to a fifth more as jitter; it gives up on a read
# after COUNTER_TIMEOUT_SECONDS; after errors it waits twice as long each time, up to COUNTER_BACKOFF_MAX_SECONDS.
REFRESH_SECONDS = max(float(os.environ.get("COUNTER_REFRESH_SECONDS", 5)),
                      float(os.environ.get("CACHE_TTL_SECONDS", 0)))
REFRESH_TIMEOUT_SECONDS = float(os.environ.get("COUNTER_TIMEOUT_SECONDS", 10))
REFRESH_MAX_SECONDS = float(os.environ.get("COUNTER_BACKOFF_MAX_SECONDS", 60))
# A visible page nobody has touched (pointer, key, scroll, touch, focus) for this long stops reading
# until the next touch: a tab left open all day would otherwise read all day. 0: it never stops.
IDLE_SECONDS = float(os.environ.get("PAGE_IDLE_SECONDS", 600))
# How long the page waits for inc-counter before it posts the visit again: beyond the platform's
# queue (10 s) plus inc-counter's publish deadline (8 s, clients.py), so a slow answer is not taken for none.
VISIT_TIMEOUT_SECONDS = float(os.environ.get("VISIT_TIMEOUT_SECONDS", 25))
# A visit refused for now (429, 5xx, no answer) is posted again with its id, waiting 1 s, then twice as
# long each time (or the Retry-After asked), VISIT_TRIES posts in all: enough to ride out a burst's
# 429s (~7 s of waits), few enough that a page left during an outage stops soon.
VISIT_TRIES = int(os.environ.get("VISIT_TRIES", 4))
VISIT_RETRY_SECONDS = 1

TEMPLATE = string.Template((Path(__file__).parent / "templates" / "page.html").read_text())

# view -> (navigation label, heading, paragraphs)
CONTENT = {
    "home": ("Home", "Welcome to the Institute", [
        "The Institute for Public Research serves its community through teaching, research and open data.",
        "Find our open positions under Jobs, or learn who we are and where to find us under About."]),
    "jobs": ("Jobs", "Work with us", [
        "We are hiring research assistants, a systems administrator and a communications officer.",
        "Send your resume to the human resources office; every application is answered within two weeks."]),
    "about": ("About", "About the Institute", [
        "Founded in 1962, the Institute employs 240 people across research, teaching and administration.",
        "Read our legal notice and find our offices in the pages below."]),
    "about_legals": ("Legal notice", "Legal notice", [
        "This site is run by the Institute for Public Research. Its content may be reused with attribution.",
        "Visits are counted anonymously, per page; no personal data is stored."]),
    "about_offices": ("Offices", "Our offices", [
        "Head office: 1200 University Avenue, open Monday to Friday, 9:00 to 17:00.",
        "Field office: 45 Harbour Street, by appointment."]),
}
NAVIGATION = ("home", "jobs", "about", "about_offices", "about_legals")


@functools.cache  # a page's HTML without its count never changes while the process lives
def render(view):
    return render_with(view)


def render_with(view, count=None):
    """The page's HTML; with a count, that total in its config ("count"), which the page shows at once."""
    label, heading, paragraphs = CONTENT[view]
    nav = "\n".join(
        f'<a href="?view={name}"{" aria-current=page" if name == view else ""}>{html.escape(CONTENT[name][0])}</a>'
        for name in NAVIGATION)
    config = json.dumps({"view": view, "incUrl": INC_COUNTER_URL, "getUrl": GET_COUNTER_URL,
                         "refreshMs": round(REFRESH_SECONDS * 1000),
                         "refreshTimeoutMs": round(REFRESH_TIMEOUT_SECONDS * 1000),
                         "refreshMaxMs": round(max(REFRESH_MAX_SECONDS, REFRESH_SECONDS) * 1000),
                         "idleMs": round(IDLE_SECONDS * 1000),
                         "visitTimeoutMs": round(VISIT_TIMEOUT_SECONDS * 1000),
                         "visitTries": VISIT_TRIES,
                         "visitRetryMs": VISIT_RETRY_SECONDS * 1000,
                         **({"count": count} if count is not None else {})})
    return TEMPLATE.substitute(
        title=html.escape(label),
        heading=html.escape(heading),
        nav=nav,
        body="\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs),
        config=config.replace("</", "<\\/"),  # keep the JSON from closing the script element
    )


def source_hash(body):
    """An inline script's or style's hash source, as a policy allows it."""
    return f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"


def content_security_policy(page):
    """What the page may load and run: its own inline style and script (by their hashes), fetches to
    its own origin and to the APIs' (when their URLs name another), nothing else; never framed."""
    def hashes(tag):
        return " ".join(map(source_hash, re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.S)))

    apis = {f"{url.scheme}://{url.netloc}" for url in map(urllib.parse.urlsplit, (INC_COUNTER_URL, GET_COUNTER_URL))
            if url.scheme and url.netloc}
    connect = " ".join(["'self'", *sorted(apis)])
    return (f"default-src 'none'; script-src {hashes('script')}; style-src {hashes('style')}; "
            f"connect-src {connect}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


@functools.cache
def page_headers(view):
    return headers_of(render(view))


def headers_of(page):
    """A page's headers; its policy holds its script's hash, which a page with its count has of its own."""
    return {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-cache",
            "Content-Security-Policy": content_security_policy(page), "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin", "Vary": "Accept-Encoding"}  # a cache keeps gzip for whom it suits


# An Accept-Encoding weight (RFC 9110 12.4.2): 0 to 1, at most three decimals.
QVALUE = re.compile(r"^(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)$")


def accepts_gzip(accept_encoding):
    """Whether a request's Accept-Encoding takes gzip (RFC 9110 12.5.3): gzip (or x-gzip), else *, with a
    weight above 0 and not below identity's when the client names identity. No header, or one not
    understood: it does not (the page goes as it is, which every client reads)."""
    weights = {}
    for item in (accept_encoding or "").split(","):
        coding, *parameters = (part.strip() for part in item.split(";"))
        weight = "1"
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                weight = value.strip()
        weights.setdefault(coding.lower(), float(weight) if QVALUE.match(weight) else 0.0)
    gzip_weight = next((weights[name] for name in ("gzip", "x-gzip", "*") if name in weights), 0.0)
    return gzip_weight > 0 and gzip_weight >= weights.get("identity", 0.0)


@functools.lru_cache(maxsize=64)  # the pages, and with PAGE_EMBEDS_COUNT the pages with their recent counts
def gzipped(page):
    return gzip.compress(page.encode(), mtime=0)  # mtime 0: the same page, the same bytes


def answer(page, headers, request):
    """The page as the client takes it: gzipped when it accepts gzip, else as it is."""
    if accepts_gzip(request.headers.get("Accept-Encoding")):
        return gzipped(page), 200, {**headers, "Content-Encoding": "gzip"}
    return page, 200, headers


# Where a page's count goes, rendered once per view and split there: the page with its count is then
# made by joining strings (rendering it whole and searching it for its hashes took ~0.2 ms of CPU, about
# half of a page request's). A count is never negative.
COUNT_SLOT = -1


@functools.cache
def counted_parts(view):
    """(the page's HTML before its count, after it, its script's text before and after it, the page's
    headers, the hash of the script in their policy that the count changes)."""
    page = render_with(view, COUNT_SLOT)
    key = json.dumps({"count": COUNT_SLOT})[1:-len(str(COUNT_SLOT)) - 1]  # '"count": ', as the config holds it
    before, after = page.split(key + str(COUNT_SLOT), 1)
    before += key
    script_before, script_after = before[before.rindex("<script>") + len("<script>"):], after[:after.index("</script>")]
    return before, after, script_before, script_after, headers_of(page), source_hash(
        script_before + str(COUNT_SLOT) + script_after)


def with_count(view, count):
    """(the page with its count, its headers): what render_with and headers_of make, made faster."""
    before, after, script_before, script_after, headers, slot_hash = counted_parts(view)
    script_hash = source_hash(script_before + str(count) + script_after)
    policy = headers["Content-Security-Policy"].replace(slot_hash, script_hash)
    return before + str(count) + after, {**headers, "Content-Security-Policy": policy}


def embedded_count(view, request):
    """The page's total as get-counter would answer it now (a stale one too, as get-counter answers it),
    or None when none is known: the page is then served without it, never failed for it."""
    try:
        count, stale, _ = totals.cached_total(view)
    except totals.Unavailable as error:
        log("WARNING", "could not read the counter", trace=trace_of(request), visit_type=view, error=str(error),
            answered="page without count")
        return None
    except Exception as error:  # anything else (credentials, a bug): the page still goes out, the error reported
        log("ERROR", "could not read the counter", trace=trace_of(request), exception=error, visit_type=view,
            error=str(error), answered="page without count")
        return None
    if stale:
        log("WARNING", "could not read the counter", trace=trace_of(request), visit_type=view, error=stale,
            answered="stale")
    return count


@functions_framework.http
def serve_page(request):
    rejected = check_request(request, ("GET", "HEAD"))
    if rejected:
        return rejected
    view, rejected = page_from(request, "view")
    if rejected:
        return rejected
    count = embedded_count(view, request) if PAGE_EMBEDS_COUNT else None
    if count is not None:
        return answer(*with_count(view, count), request)
    return answer(render(view), page_headers(view), request)
