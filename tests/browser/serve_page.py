"""Drive `memstate serve`'s page in headless Chromium (Playwright, Debian's chromium).

Called by tests/it/serve_browser.rs with: the server's URL, the memstate binary, the database,
an out-of-memory dump to import while the page is open, the snapshot count the page must show
first, one allocation of a large memory to zoom to in the map (snapshot, memory, offset, size,
uid) and one in its history (offset, uid), and a folder for the screenshots. Prints one line per step; exits non-zero on the first step that fails.
"""

import subprocess
import sys
import time
from urllib.parse import unquote

from playwright.sync_api import sync_playwright

(url, memstate, db, oom_dump, expected, snapshot, memory, offset, size, uid, history_offset, history_uid, shots) = sys.argv[1:]
expected, offset, size, history_offset = int(expected), int(offset), int(size), int(history_offset)
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-quic"]


def check(condition, what):
    if not condition:
        print("FAILED:", what, flush=True)
        sys.exit(1)
    print("ok:", what, flush=True)


def wait_for(page, condition, what, timeout=10000):
    """Wait until `condition` holds in the page, or fail saying what the page shows."""
    try:
        page.wait_for_function(condition, timeout=timeout)
    except Exception as error:  # Playwright's timeout: say what the page showed instead.
        shown = page.evaluate("[location.href, document.getElementById('error') && document.getElementById('error').textContent, JSON.stringify(document.body.dataset)]")
        print("FAILED:", what, "-", type(error).__name__, shown, flush=True)
        sys.exit(1)


def map_frame(page):
    """The page's map frame, once the browser has made it (a busy machine may take a while)."""
    page.wait_for_function("document.getElementById('mapFrame').getAttribute('src') !== null", timeout=30000)
    for _ in range(100):
        frame = next((f for f in page.frames if "/map?" in f.url), None)
        if frame is not None:
            return frame
        page.wait_for_timeout(100)
    check(False, "the map frame is made")


def open_shared(browser, address, drawn):
    """The app at a shared address in a new page, and its map frame once `drawn` holds there.
    A second page loads the app, the run and the map afresh: on a machine busy with other tests
    that once took more than 10 s, so the wait is long (it only ends a failing run later)."""
    other = browser.new_page(viewport={"width": 1300, "height": 1000})
    other.goto(address)
    frame = map_frame(other)
    frame.wait_for_function(drawn, timeout=30000)
    return other, frame


with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    started = time.monotonic()
    page.goto(url)
    page.wait_for_function("document.body.dataset.snapshots !== undefined", timeout=10000)
    check(time.monotonic() - started < 5, "the first view is drawn")
    shown = int(page.evaluate("document.body.dataset.snapshots"))
    check(shown == expected, f"the overview shows the {expected} snapshots ({shown})")
    page.screenshot(path=f"{shots}/serve-overview.png", full_page=True)

    # Live: an import while the page is open; the page shows it without a reload.
    subprocess.run([memstate, "--db", db, "import", oom_dump], check=True, capture_output=True)
    imported = time.monotonic()
    page.wait_for_function(f"Number(document.body.dataset.snapshots) > {expected}", timeout=5000)
    seen = time.monotonic() - imported
    check(seen < 2.0, f"the new snapshot appears within 2 s ({seen:.2f} s)")
    page.wait_for_selector("#alert", state="visible", timeout=2000)
    check("New out-of-memory" in page.inner_text("#alert"), "the overview marks the new OOM")

    # Follow the OOM link: the story page, the map opened on the failure with its verdict.
    links = page.locator("a.story")
    check(links.count() >= 1, "a failure links to its story")
    links.first.click()
    page.wait_for_function("document.body.dataset.verdict !== undefined", timeout=10000)
    verdict = page.evaluate("document.body.dataset.verdict")
    check(verdict.split(".")[0] in ("Fragmentation", "Exhaustion", "Cannot tell", "Fits now"),
          f"the story page gives the verdict ({verdict[:60]})")
    check(page.evaluate("document.body.dataset.window") is not None, "the request's window is marked")
    page.screenshot(path=f"{shots}/serve-story.png", full_page=True)
    page.go_back()

    # The app shows a large memory's map (the page `viz` renders) in a frame. Zoom it, wheel after
    # wheel at an allocation the page was not given, until the server has sent what is in view
    # and the allocation is drawn whole; hover it and read its details.
    page.goto(f"{url.split('?')[0]}#snapshot={snapshot}&memory={memory}")
    wait_for(page, "document.getElementById('mapFrame').getAttribute('src') !== null", "the map frame is shown")
    frame = map_frame(page)
    try:
        frame.wait_for_function("document.body.dataset.drawn === '1'", timeout=10000)
    except Exception:
        check(False, "the map page in the frame draws")
    given = frame.evaluate(f"memory().a.length / FIELDS")
    check(given < 9000 and frame.evaluate("memory().g !== null"), f"the page holds {given:.0f} of the memory's allocations, the rest summarized")
    box = frame.locator("#map").bounding_box()
    center = offset + size / 2
    y = box["y"] + box["height"] * 0.8
    def x_of(byte):
        view = frame.evaluate("view")
        return box["x"] + (byte - view[0]) / (view[1] - view[0]) * box["width"]
    for _ in range(80):
        view = frame.evaluate("view")
        if frame.evaluate("document.body.dataset.detail") == "api" and size / (view[1] - view[0]) * box["width"] > 6:
            break
        page.mouse.move(x_of(center), y)
        page.mouse.wheel(0, -120)
        page.wait_for_timeout(200)
    page.wait_for_timeout(400)
    detail = frame.evaluate("document.body.dataset.detail")
    check(detail == "api", f"the server sent the allocations in view ({detail}, {frame.evaluate('document.body.dataset.detailCount')})")
    for _ in range(10):
        page.mouse.move(x_of(center), y)
        page.mouse.move(x_of(center) + 1, y)
        if uid in frame.inner_text("#tip"):
            break
        page.wait_for_timeout(200)
    tip = frame.inner_text("#tip")
    check(uid in tip and "provenance" in tip, f"its details are read ({tip.splitlines()[0] if tip else 'nothing'})")
    page.screenshot(path=f"{shots}/serve-zoomed.png", full_page=True)

    # The app's address now holds the map's view: opened elsewhere, it shows the same range.
    page.wait_for_timeout(800)
    shared = page.url
    check("range=" in shared, f"the address holds the map's range ({shared.split('#')[-1]})")
    other, again = open_shared(browser, shared, "document.body.dataset.drawn === '1'")
    low, high = (float(n) for n in again.evaluate("document.body.dataset.view").split(":"))
    named = [float(n) for n in unquote(shared.split("range=")[1].split("&")[0]).split(":")]
    check(abs(low - named[0]) <= 2 and abs(high - named[1]) <= 2 and low <= center <= high,
          f"the shared link opens the map on the allocation, at the range it names ([{low:.0f}, {high:.0f}))")
    other.close()

    # The same in the history below it (address down, time across), at another allocation (the
    # history keeps other spans whole than the map keeps allocations): zoomed to its addresses,
    # its spans come from the server; hovering one gives its details.
    center = history_offset + size / 2
    check(frame.evaluate("history().g !== null"), "the history is summarized past the spans the page holds")
    frame.locator("#history").scroll_into_view_if_needed()
    hbox = frame.locator("#history").bounding_box()
    def y_of(byte):
        view = frame.evaluate("hView")
        return hbox["y"] + (byte - view[2]) / (view[3] - view[2]) * hbox["height"]
    hx = hbox["x"] + hbox["width"] * 0.5
    for _ in range(60):
        view = frame.evaluate("hView")
        if frame.evaluate("document.body.dataset.historyDetail") == "api" and size / (view[3] - view[2]) * hbox["height"] > 6:
            break
        hbox = frame.locator("#history").bounding_box()
        page.mouse.move(hx, y_of(center))
        page.mouse.wheel(0, -120)
        page.wait_for_timeout(200)
    page.wait_for_timeout(400)
    detail = frame.evaluate("document.body.dataset.historyDetail")
    check(detail == "api", f"the server sent the history's spans in view ({detail}, {frame.evaluate('document.body.dataset.historyDetailCount')}; view {frame.evaluate('hView')}, detail {frame.evaluate('history().g.detail')}, box {hbox})")
    # Where the canvas is now (the page may have scrolled while it zoomed), then hover.
    frame.locator("#history").scroll_into_view_if_needed()
    hbox = frame.locator("#history").bounding_box()
    hx = hbox["x"] + hbox["width"] * 0.5
    for _ in range(10):
        page.mouse.move(hx, y_of(center))
        page.mouse.move(hx + 1, y_of(center))
        if history_uid in frame.inner_text("#tip"):
            break
        page.wait_for_timeout(200)
    tip = frame.inner_text("#tip")
    check(history_uid in tip, f"its span's details are read ({tip.splitlines()[0] if tip else 'nothing'})")
    page.screenshot(path=f"{shots}/serve-history.png", full_page=True)

    # The history's time-window picker: the middle fifth of the run. The app's address names the
    # window, and the link opens the history on it.
    first, last = frame.evaluate("historyExtent(history())")[:2]
    since, until = first + (last - first) * 0.4, first + (last - first) * 0.6
    frame.fill("#hSince", f"{since:.6f}")
    frame.fill("#hUntil", f"{until:.6f}")
    frame.click("#hApply")
    view = frame.evaluate("hView")
    check(abs(view[0] - since) < 1e-3 and abs(view[1] - until) < 1e-3, f"the history shows the time window ({view[0]:.3f} to {view[1]:.3f} s)")
    page.wait_for_timeout(800)
    shared = page.url
    check("window=" in shared, f"the address holds the time window ({shared.split('#')[-1]})")
    other, again = open_shared(browser, shared, "document.body.dataset.drawn === '1' && document.body.dataset.historyView !== undefined")
    shown = [float(n) for n in again.evaluate("document.body.dataset.historyView").split(":")]
    check(abs(shown[0] - since) < 1e-3 and abs(shown[1] - until) < 1e-3, f"the shared link opens the history on the window ({shown[0]:.3f} to {shown[1]:.3f} s)")
    other.close()

    # The overview draws a mark per stretch of time, never more than there are snapshots, and a
    # node's name shows that node alone, named in the address.
    marks = int(page.evaluate("document.body.dataset.overviewMarks"))
    total = int(page.evaluate("document.body.dataset.snapshots"))
    check(0 < marks <= total, f"the overview draws {marks} marks for {total} snapshots")
    page.locator("a.nodeName").first.click()
    page.wait_for_timeout(200)
    check("node=" in page.url and page.locator("#nodes .node").count() == 1, f"a node's name shows it alone ({page.url.split('#')[-1]})")
    check(not errors, f"no script error ({errors[:1]})")
    browser.close()
