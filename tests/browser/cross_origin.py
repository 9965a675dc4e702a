"""A page of another origin asks `memstate serve`'s API, as an attacking page would, in headless
Chromium (Playwright, Debian's chromium); Playwright records the status each request got.

Called by tests/it/serve_browser.rs with the server's URL (with its token when it has one). The
browser first opens that URL (so that a token's cookie is set, as for the user), then a page
served on another port of 127.0.0.1 whose <img> tags ask the SQL box and the overview. Chromium
blocks a JSON answer to an <img> from the page (ORB) whatever its status, so the status the
server sent is read from the DevTools protocol (Network.responseReceivedExtraInfo). Prints one
line per step; exits non-zero on the first step that fails.
"""

import http.server
import sys
import threading
import time
from urllib.parse import urlsplit

from playwright.sync_api import sync_playwright

url = sys.argv[1]
parts = urlsplit(url)
base = f"{parts.scheme}://{parts.netloc}"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-quic"]
ASKED = ["/api/sql?q=SELECT%201", "/api/sql?q=BEGIN", "/api/overview"]


def check(condition, what):
    if not condition:
        print("FAILED:", what, flush=True)
        sys.exit(1)
    print("ok:", what, flush=True)


class Attacker(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        tags = "".join(f'<img src="{base}{path}">' for path in ASKED)
        body = f"<!doctype html><title>elsewhere</title>{tags}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


elsewhere = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
threading.Thread(target=elsewhere.serve_forever, daemon=True).start()
attacker = f"http://127.0.0.1:{elsewhere.server_address[1]}/attack.html"

with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
    page = browser.new_page()
    page.goto(url)
    own = page.evaluate("fetch('/api/sql?q=SELECT%201').then(r => r.status)")
    check(own == 200, f"the page's own request to the SQL box is answered ({own})")
    urls, statuses = {}, {}
    devtools = page.context.new_cdp_session(page)
    devtools.on("Network.requestWillBeSent",
                lambda event: urls.__setitem__(event["requestId"], event["request"]["url"]))
    devtools.on("Network.responseReceivedExtraInfo",
                lambda event: statuses.__setitem__(event["requestId"], event["statusCode"]))
    devtools.send("Network.enable")
    page.goto(attacker)
    page.wait_for_load_state("load")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen = {urls.get(request): status for request, status in statuses.items()}
        if all(base + path in seen for path in ASKED):
            break
        page.wait_for_timeout(100)
    for path in ASKED:
        status = seen.get(base + path)
        check(status == 403, f"{path} asked by a page on another port is refused ({status})")
    browser.close()
elsewhere.shutdown()
print("ok: every request of the other page was refused", flush=True)
