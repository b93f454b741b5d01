"""serve-page: GET /app?view=P -> the page's HTML.

The page itself registers its visit (POST to inc-counter) and shows its total (from get-counter),
so this function needs no access to Firestore or Pub/Sub. The sibling functions' URLs are
settings: relative paths work wherever one host routes all three, as the Cloud Functions URL does.
"""
import base64
import functools
import hashlib
import html
import json
import os
import re
import string
import urllib.parse
from pathlib import Path

import functions_framework

from common import check_request, page_from

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


@functools.cache  # a page's HTML never changes while the process lives
def render(view):
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
                         "visitRetryMs": VISIT_RETRY_SECONDS * 1000})
    return TEMPLATE.substitute(
        title=html.escape(label),
        heading=html.escape(heading),
        nav=nav,
        body="\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs),
        config=config.replace("</", "<\\/"),  # keep the JSON from closing the script element
    )


def content_security_policy(page):
    """What the page may load and run: its own inline style and script (by their hashes), fetches to
    its own origin and to the APIs' (when their URLs name another), nothing else; never framed."""
    def hashes(tag):
        return " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
                        for body in re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.S))

    apis = {f"{url.scheme}://{url.netloc}" for url in map(urllib.parse.urlsplit, (INC_COUNTER_URL, GET_COUNTER_URL))
            if url.scheme and url.netloc}
    connect = " ".join(["'self'", *sorted(apis)])
    return (f"default-src 'none'; script-src {hashes('script')}; style-src {hashes('style')}; "
            f"connect-src {connect}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


@functools.cache
def page_headers(view):
    return {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-cache",
            "Content-Security-Policy": content_security_policy(render(view)), "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin"}


@functions_framework.http
def serve_page(request):
    rejected = check_request(request, ("GET", "HEAD"))
    if rejected:
        return rejected
    view, rejected = page_from(request, "view")
    if rejected:
        return rejected
    return render(view), 200, page_headers(view)
