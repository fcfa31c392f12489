"""`oakwatch serve DIR`: the attached console as a web page, offline, in a real browser.

The browser test drives Debian's chromium through the system chromedriver (never Selenium Manager),
offline: every host but 127.0.0.1 fails to resolve, and the page's resources must all come from the
server. It is skipped, with the reason, where chromium or chromedriver is missing (.ci/run installs them).
"""

from __future__ import annotations

import io
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from app.servers.serve import OakwatchServer, app_command, is_loopback

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM = next((Path(p) for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if Path(p).exists()), None)
URL = re.compile(rb"(?:https?|wss?)://[^\s\"'`)<>\\]*", re.IGNORECASE)
# What the served console shows first (attach's overview of every trial), and the drilled-in view that
# enter opens on the selected trial (its frame pane).
OVERVIEW_TEXT = ("Trials", "X-01", "enter opens")
FRAME_PANE_TEXT = "Frame"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(dry_run_copy, tmp_path):
    """`oakwatch serve` on a free port over a copy of a real cartridge run: (base URL, the process)."""
    port = free_port()
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", str(dry_run_copy), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                proc.kill()
                pytest.fail(f"oakwatch serve did not start: {log.read()}")
            time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/", proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.refs.append(value)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200, url
        return response.read()


def _in_comment(body: bytes, at: int) -> bool:
    """Whether offset `at` is inside a /* ... */ comment (the licence text bundled in xterm's CSS and JS)."""
    return body.rfind(b"/*", 0, at) > body.rfind(b"*/", 0, at)


def _foreign_urls(body: bytes) -> list[bytes]:
    """URLs in `body` to a host other than this machine, outside comments (nothing the browser would fetch)."""
    found = []
    for match in URL.finditer(body):
        host = urlsplit(match.group().decode("ascii", "replace")).hostname or ""
        if not is_loopback(host) and not _in_comment(body, match.start()):
            found.append(match.group())
    return found


def test_page_and_everything_it_loads_name_no_other_host(served):
    base, _ = served
    page = _get(base)
    assert _foreign_urls(page) == [], "the page names another host"
    assert b"googleapis" not in page and b"@import" not in page
    parser = _Refs()
    parser.feed(page.decode("utf-8"))
    assert parser.refs, "the page loads textual-serve's script and stylesheet"
    for ref in parser.refs:
        assert not urlsplit(ref).netloc and not urlsplit(ref).scheme, f"{ref}: not relative to the page"
        body = _get(urljoin(base, ref))
        assert _foreign_urls(body) == [], f"{ref} names another host"
        if ref.endswith(".css"):  # and anything a stylesheet pulls in
            for inner in re.findall(rb"url\(['\"]?([^'\")]+)", body):
                assert not urlsplit(inner.decode()).netloc, f"{ref}: {inner!r}"
                assert _foreign_urls(_get(urljoin(urljoin(base, ref), inner.decode()))) == []


def _upgrade(base: str, **headers) -> int:
    """Status of a websocket handshake to the console with these headers."""
    request = urllib.request.Request(urljoin(base, "ws"), headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", **headers})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_websocket_refuses_other_sites_and_rebound_names(served):
    base, _ = served
    port = urlsplit(base).port
    assert _upgrade(base, Origin="http://evil.example") == 403
    assert _upgrade(base, Origin=f"http://127.0.0.1:{port + 1}") == 403
    assert _upgrade(base, Host=f"rebound.example:{port}", Origin=f"http://rebound.example:{port}") == 403


def test_command_is_read_only_unless_operator(tmp_path):
    folder = tmp_path / "exp"
    command = app_command(folder, operator=False)
    assert shlex.split(command) == [sys.executable, "-m", "app.cli", "attach", str(folder.resolve()), "--read-only"]
    assert shlex.split(app_command(folder, operator=True)) == [sys.executable, "-m", "app.cli", "attach",
                                                               str(folder.resolve())]
    server = OakwatchServer(command, folder=folder, host="127.0.0.1", port=8123, operator=False)
    assert server.public_url == "http://127.0.0.1:8123"
    assert is_loopback("127.0.0.1") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_serve_refuses_a_non_folder_and_warns_off_loopback(dry_run_copy, tmp_path):
    from app.cli import main

    assert main(["serve", str(tmp_path / "nothing")]) == 2
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", str(dry_run_copy), "--host", "0.0.0.0",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = proc.stdout.readline()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert f"http://0.0.0.0:{port}/ (read-only" in started
    assert "warning: binding to 0.0.0.0, not 127.0.0.1" in err and "no login" in err


# The browser: capture what the console sends (the terminal's bytes) beside what xterm draws.
CAPTURE = r"""
window.__oakwatch = {text: "", sockets: 0};
const Native = window.WebSocket;
const decoder = new TextDecoder();
window.WebSocket = function (url, protocols) {
  const ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
  window.__oakwatch.sockets += 1;
  ws.addEventListener("message", (event) => {
    if (typeof event.data !== "string") {
      window.__oakwatch.text += decoder.decode(new Uint8Array(event.data), {stream: true});
    }
  });
  return ws;
};
window.WebSocket.prototype = Native.prototype;
Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
"""
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b.")


def _browser(tmp_path: Path):
    if CHROMIUM is None or not CHROMEDRIVER.is_file():
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver; "
                    ".ci/run installs them)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager fetch a driver
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # offline: no other host resolves
                "--window-size=1600,1000", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(15)
    return driver


def _screen_text(driver) -> str:
    return ANSI.sub("", driver.execute_script("return window.__oakwatch.text"))


def _wait(driver, condition, what: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = re.sub(r"\s+", " ", _screen_text(driver))[-3000:]
            raise AssertionError(f"timed out waiting for {what}; the console sent, last: {tail!r}")
        time.sleep(0.1)


def _distinct_colours(driver) -> int:
    from PIL import Image

    shot = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    return len(set(shot.resize((400, 250)).getdata()))


def test_console_in_a_real_browser_offline(served, tmp_path):
    base, proc = served
    driver = _browser(tmp_path)
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CAPTURE})
        driver.get(base)
        _wait(driver, lambda: all(t in _screen_text(driver) for t in OVERVIEW_TEXT),
              f"the trial overview: {OVERVIEW_TEXT}")
        _wait(driver, lambda: driver.execute_script(
            "return document.body.classList.contains('-first-byte')"), "the terminal to show")
        assert driver.execute_script("return window.__oakwatch.sockets") == 1
        # everything the page loaded came from this server
        loaded = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert loaded and all(u.startswith(base) for u in loaded), loaded
        time.sleep(0.3)  # xterm drew the overview: the page is not blank
        overview_colours = _distinct_colours(driver)
        assert overview_colours > 8
        # a key reaches the app: enter drills into the trial, whose view has the frame pane
        before = len(_screen_text(driver))
        # Typed as a user types, to the focused terminal: newer Chrome refuses send_keys on xterm's
        # off-screen helper textarea ("element not interactable"), so focus it and press the key.
        from selenium.webdriver.common.action_chains import ActionChains

        driver.execute_script("document.querySelector('.xterm-helper-textarea').focus()")
        ActionChains(driver).send_keys("\ue007").perform()  # Keys.ENTER
        _wait(driver, lambda: FRAME_PANE_TEXT in _screen_text(driver)[before:], "the frame pane after enter")
        time.sleep(0.5)  # the frame itself, drawn in half-blocks: many more colours than the overview
        assert _distinct_colours(driver) > overview_colours
        if os.environ.get("OAKWATCH_SERVE_SCREENSHOT"):
            driver.save_screenshot(os.environ["OAKWATCH_SERVE_SCREENSHOT"])
        assert proc.poll() is None
    finally:
        driver.quit()


