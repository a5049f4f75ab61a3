"""Open a rendered report in headless Chromium and check what a reader's browser would do with it:
no console error, no request beyond the page itself (inline `data:` images are part of it), every
section its results call for, a first screen (1280 × 900) that shows the ε overview figure, the
verdicts and the ratio that decides each refuted one, no table row taller than that screen, no
horizontal overflow of the page, no table wider than its container, no word or number broken across
two lines (a run marked `.long` by `privaudit.reports.notation`, a hash or a blob, is the one exception), and
a screenshot of that first screen.

    python -m privaudit.reports.browser_check results/demo/report.html [--screenshot FILE] [--chromium PATH]

Chromium is driven through the DevTools protocol over `--remote-debugging-pipe` (it reads commands
on fd 3 and writes replies and events on fd 4, one JSON message per NUL-terminated record), so
console errors, exceptions, CSP violations and network requests arrive as events rather than being
guessed from log text, and the standard library is enough. Exit 0 when every check passes; 1 with
a one-line reason when one fails; 2 when the report or Chromium cannot be found.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from privaudit.files import write_inside
from privaudit.store import ResultsStore

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars")
VIEWPORT = (1280, 900)
TIMEOUT_S = 60.0
SETTLE_S = 0.5
"""How long to keep listening after the load event, for late console errors."""

# Sections every report has, and those present only when the results hold rows of a type.
ALWAYS = ("verdicts", "claims", "training", "provenance")
BY_ROW_TYPE = {"inversion": "inversion", "coalition": "coalition", "membership": "membership", "audit": "audits"}

DOM_PROBE = """JSON.stringify({
  sections: Array.from(document.querySelectorAll('section[id]'), s => s.id),
  scripts: document.querySelectorAll('script').length,
  references: Array.from(document.querySelectorAll('[src],[href],[srcset],[poster],[data],[action]'))
    .flatMap(e => ['src', 'href', 'srcset', 'poster', 'data', 'action'].map(a => e.getAttribute(a)))
    .filter(v => v !== null && !v.startsWith('data:') && !v.startsWith('#')),
  verdictsTop: (document.getElementById('verdicts') || {getBoundingClientRect: () => ({top: Infinity})})
    .getBoundingClientRect().top,
  figure: (e => e ? {top: e.getBoundingClientRect().top, bottom: e.getBoundingClientRect().bottom,
                     loaded: e.complete && e.naturalWidth > 0} : null)(document.getElementById('epsilon-figure')),
  verdictList: (e => e ? e.getBoundingClientRect().top : null)(document.querySelector('#verdicts ul.verdict-groups')),
  tallest: Array.from(document.querySelectorAll('tr'), r => ({height: r.getBoundingClientRect().height,
    text: (r.innerText || '').trim().slice(0, 80)})).reduce((a, b) => (b.height > a.height ? b : a),
    {height: 0, text: ''}),
  pageWidth: document.documentElement.scrollWidth,
  wideTables: Array.from(document.querySelectorAll('table'), t => {
    const box = t.parentElement.getBoundingClientRect();
    return {width: t.getBoundingClientRect().width, container: box.width,
            head: (t.querySelector('tr') || {innerText: ''}).innerText.trim().replace(/\\s+/g, ' ').slice(0, 80)};
  }).filter(t => t.width > t.container + 0.5),
  brokenTokens: (() => {
    const found = [];
    const token = /\\p{N}+(?:[.,]\\p{N}+)*(?:e[-+]\\p{N}+)?|[\\p{L}\\p{N}]+/gu;
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.parentElement || node.parentElement.closest('pre, .long')) continue;
      for (const match of node.data.matchAll(token)) {
        if (match[0].length < 2) continue;
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) found.push(match[0]);
      }
    }
    return found;
  })(),
  refuted: Array.from(document.querySelectorAll('#verdicts li[data-status="refuted"]'), li => ({
    subjects: li.querySelectorAll('.ratio').length,
    bottom: Math.max(0, ...Array.from(li.querySelectorAll('.ratio'), r => r.getBoundingClientRect().bottom)),
    ratios: Array.from(li.querySelectorAll('.ratio'), r => r.innerText)})),
  title: document.title
})"""


class CheckFailed(Exception):
    """One check did not pass; the message is the one-line reason."""


def expected_sections(results_dir: Path) -> list[str]:
    """The section ids a report of these results must have: the fixed ones, and one per kind of
    attack row present, the rows read as the report reads them (`ResultsStore`; rows without a
    `type` are training rows), and the position section where a position audit ended."""
    rows = ResultsStore(results_dir).rows()
    types = {row.get("type", "training") for row in rows}
    positions = any(row.get("type") == "audit" and row.get("kind") == "position" and row.get("status") == "ok"
                    for row in rows)
    return list(ALWAYS) + [section for kind, section in BY_ROW_TYPE.items() if kind in types] + \
        (["position"] if positions else [])


class DevTools:
    """A Chromium process and its DevTools pipe: send a command, wait for its reply, keep every
    event that arrives meanwhile."""

    def __init__(self, chromium: str, profile: str) -> None:
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        # Above 4, so the child's dup2 onto 3 and 4 cannot overwrite one with the other.
        child_read = fcntl.fcntl(commands_read, fcntl.F_DUPFD_CLOEXEC, 10)
        child_write = fcntl.fcntl(replies_write, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(commands_read)
        os.close(replies_write)

        def bind_pipe() -> None:
            os.dup2(child_read, 3)
            os.dup2(child_write, 4)

        self.process = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=bind_pipe, close_fds=False)
        os.close(child_read)
        os.close(child_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.deadline = time.monotonic() + TIMEOUT_S

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command and return its result; CheckFailed on a protocol error."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive(self.deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CheckFailed(f"DevTools {method} failed: {reply['error'].get('message', reply['error'])}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, timeout: float) -> bool:
        """Collect events until `method` arrives (True) or `timeout` seconds pass (False)."""
        until = min(time.monotonic() + timeout, self.deadline)
        while True:
            try:
                event = self._receive(until)
            except TimeoutError:
                return False
            if "method" in event:
                self.events.append(event)
                if event["method"] == method:
                    return True

    def listen(self, seconds: float) -> None:
        """Collect whatever events arrive in the next `seconds`."""
        self.wait_for("", seconds)

    def _receive(self, until: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = until - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self._replies], [], [], left)
            if ready:
                chunk = os.read(self._replies, 1 << 20)
                if not chunk:
                    raise CheckFailed(f"chromium exited (code {self.process.poll()}) before the check finished")
                self._buffer += chunk
        record, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(record)

    def close(self) -> None:
        try:
            os.write(self._commands, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._commands)
            os.close(self._replies)


def _console_errors(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and browser log errors (CSP violations, failed loads)."""
    errors = []
    for event in events:
        params = event.get("params", {})
        if event["method"] == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            errors.append(details.get("exception", {}).get("description") or details.get("text", "exception"))
        elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(" ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])))
        elif event["method"] == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            errors.append(params["entry"].get("text", "error"))
    return errors


def _requests(events: list[dict[str, Any]], page_url: str) -> list[str]:
    """URLs the page asked for beyond itself and its inline data: URIs."""
    urls = []
    for event in events:
        if event["method"] == "Network.requestWillBeSent":
            url = event["params"].get("request", {}).get("url", "")
            if url != page_url and not url.startswith("data:"):
                urls.append(url)
    return urls


def check_report(report: Path, screenshot: Path, chromium: str) -> str:
    """Run every check on `report`, write the screenshot, and return the summary line;
    CheckFailed with the reason of the first check that fails."""
    page_url = report.resolve().as_uri()
    expected = expected_sections(report.parent)
    with tempfile.TemporaryDirectory(prefix="privaudit-chromium-") as profile:
        browser = DevTools(chromium, profile)
        try:
            target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                browser.send(f"{domain}.enable", session=session)
            width, height = VIEWPORT
            browser.send("Emulation.setDeviceMetricsOverride",
                         {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
            browser.send("Page.navigate", {"url": page_url}, session)
            if not browser.wait_for("Page.loadEventFired", TIMEOUT_S):
                raise CheckFailed(f"the page did not finish loading within {TIMEOUT_S:.0f} s")
            browser.listen(SETTLE_S)
            probe = json.loads(browser.send("Runtime.evaluate", {"expression": DOM_PROBE, "returnByValue": True},
                                            session)["result"]["value"])
            shot = browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
        except TimeoutError:
            raise CheckFailed(f"chromium did not answer within {TIMEOUT_S:.0f} s") from None
        finally:
            browser.close()
    write_inside(screenshot.parent, screenshot.name, base64.b64decode(shot), "screenshot")

    requests = _requests(browser.events, page_url)
    if requests:
        raise CheckFailed(f"{len(requests)} network request(s) beyond the page, first: {requests[0][:200]}")
    errors = _console_errors(browser.events)
    if errors:
        raise CheckFailed(f"{len(errors)} console error(s), first: {errors[0][:200]}")
    if probe["references"]:
        raise CheckFailed(f"{len(probe['references'])} reference(s) to outside the page, first: "
                          f"{probe['references'][0][:200]}")
    if probe["scripts"]:
        raise CheckFailed(f"{probe['scripts']} <script> element(s) in the page (the report has none of its own)")
    missing = [section for section in expected if section not in probe["sections"]]
    if missing:
        raise CheckFailed(f"section(s) missing: {', '.join(missing)} (found: {', '.join(probe['sections'])})")
    if not probe["sections"] or probe["sections"][0] != "verdicts":
        raise CheckFailed(f"the page does not open with the verdicts (first section: {probe['sections'][:1]})")
    if probe["verdictsTop"] >= VIEWPORT[1]:
        raise CheckFailed("the verdicts are below the first screen, so the screenshot does not show them")
    figure = probe["figure"]
    if figure is None or not figure["loaded"]:
        raise CheckFailed("the ε overview figure (#epsilon-figure) is missing or did not load")
    if figure["bottom"] > VIEWPORT[1]:
        raise CheckFailed(f"the ε overview figure ends at {figure['bottom']:.0f} px, below the first screen "
                          f"({VIEWPORT[1]} px)")
    if probe["verdictList"] is None or probe["verdictList"] >= VIEWPORT[1]:
        raise CheckFailed("the list of verdicts is not on the first screen")
    tallest = probe["tallest"]
    if tallest["height"] > VIEWPORT[1]:
        raise CheckFailed(f"a table row is {tallest['height']:.0f} px tall, more than the screen's {VIEWPORT[1]} px: "
                          f"{tallest['text']!r}")
    if probe["pageWidth"] > VIEWPORT[0]:
        raise CheckFailed(f"the page is {probe['pageWidth']} px wide: it overflows the {VIEWPORT[0]} px window")
    if probe["wideTables"]:
        wide = probe["wideTables"][0]
        raise CheckFailed(f"{len(probe['wideTables'])} table(s) wider than their container, first: "
                          f"{wide['width']:.0f} px in {wide['container']:.0f} px ({wide['head']!r})")
    if probe["brokenTokens"]:
        raise CheckFailed(f"{len(probe['brokenTokens'])} word(s) or number(s) broken across lines, first: "
                          f"{probe['brokenTokens'][0]!r}")
    for refuted in probe["refuted"]:
        if refuted["subjects"] == 0 or refuted["bottom"] > VIEWPORT[1]:
            raise CheckFailed("a refuted verdict's deciding ratio is not on the first screen")
    return (f"browser check passed: {report} — sections {', '.join(probe['sections'])}; no console error; "
            f"no request beyond the page; ε figure and verdicts on the first {VIEWPORT[0]}×{VIEWPORT[1]} screen; "
            f"tallest table row {tallest['height']:.0f} px; no table wider than its container; no broken word or "
            f"number; {sum(r['subjects'] for r in probe['refuted'])} refuted verdict(s) with their ratio on the first "
            f"screen; screenshot {screenshot}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m privaudit.reports.browser_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--screenshot", type=Path, help="where to save the PNG (default: beside the report)")
    parser.add_argument("--chromium", default=None, help="the browser binary (default: chromium on PATH)")
    args = parser.parse_args(argv)
    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not args.report.is_file():
        print(f"browser check: no report at {args.report}", file=sys.stderr)
        return 2
    if chromium is None:
        print("browser check: chromium not found on PATH (apt-get install chromium)", file=sys.stderr)
        return 2
    try:
        print(check_report(args.report, args.screenshot or args.report.with_suffix(".png"), chromium))
    except CheckFailed as failure:
        print(f"browser check failed: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
