"""Drives a real headless Chromium (Debian's /usr/bin/chromium) with Playwright, one JSON command per line.

Runs under the Python of the Playwright tool venv (tests/realtools.py pip_tool), never the
test's own: ``python browser_driver.py CHROMIUM``. Each line on stdin is ``{"op": ..., ...}``;
each answer on stdout is ``{"ok": true, "value": ...}`` or ``{"ok": false, "error": "..."}``.
No browser is ever downloaded: Playwright launches the executable it is given.
"""

import json
import sys

from playwright.sync_api import sync_playwright

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage"]


def main() -> int:
    executable = sys.argv[1]
    problems = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text} @ {m.location.get('url', '')}")
                if m.type in ("error",) else None)
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        for raw in sys.stdin:
            cmd = json.loads(raw)
            op, timeout = cmd["op"], cmd.get("timeout", 10_000)
            try:
                value = None
                if op == "goto":
                    resp = page.goto(cmd["url"], wait_until="domcontentloaded")
                    value = resp.status if resp else None
                elif op == "fetch":  # a request from inside the page (same origin), e.g. without the token
                    value = page.evaluate(
                        "async ([u, o]) => { const r = await fetch(u, o); return [r.status, await r.text()]; }",
                        [cmd["url"], cmd.get("init", {})])
                elif op == "wait_text":  # an element matching selector whose text contains text
                    page.locator(cmd["selector"], has_text=cmd["text"]).first.wait_for(state="visible", timeout=timeout)
                elif op == "wait":
                    page.locator(cmd["selector"]).first.wait_for(state=cmd.get("state", "visible"), timeout=timeout)
                elif op == "click":
                    page.locator(cmd["selector"]).first.click(timeout=timeout)
                elif op == "fill":
                    page.locator(cmd["selector"]).first.fill(cmd["value"], timeout=timeout)
                elif op == "select":
                    page.locator(cmd["selector"]).first.select_option(cmd["value"], timeout=timeout)
                elif op == "text":
                    value = page.locator(cmd["selector"]).first.inner_text(timeout=timeout)
                elif op == "eval":
                    value = page.evaluate(cmd["js"])
                elif op == "press":  # a key, as a person types it (to the focused element, else the page)
                    page.keyboard.press(cmd["key"])
                elif op == "count":
                    value = page.locator(cmd["selector"]).count()
                elif op == "texts":
                    value = page.locator(cmd["selector"]).all_inner_texts()
                elif op == "value":
                    value = page.locator(cmd["selector"]).first.input_value(timeout=timeout)
                elif op == "wait_fn":  # until a JavaScript expression is truthy (a function: the page's CSP forbids eval)
                    page.wait_for_function(f"() => ({cmd['js']})", timeout=timeout)
                elif op == "viewport":
                    page.set_viewport_size({"width": cmd["width"], "height": cmd.get("height", 900)})
                elif op == "back":
                    page.go_back(wait_until="commit")
                elif op == "forward":
                    page.go_forward(wait_until="commit")
                elif op == "reload":
                    resp = page.reload(wait_until="domcontentloaded")
                    value = resp.status if resp else None
                elif op == "url":
                    value = page.url
                elif op == "screenshot":
                    page.screenshot(path=cmd["path"], full_page=True)
                elif op == "problems":
                    value = list(problems)
                elif op == "quit":
                    print(json.dumps({"ok": True, "value": None}), flush=True)
                    break
                else:
                    raise ValueError(f"unknown op {op!r}")
                print(json.dumps({"ok": True, "value": value}), flush=True)
            except Exception as exc:  # noqa: BLE001 - reported to the test, which fails with it
                print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
