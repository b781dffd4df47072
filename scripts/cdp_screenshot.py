"""Photographs a web page with headless Chromium after a real-time wait (for pages that load
their data asynchronously, such as TensorBoard's trace viewer), through Chrome's DevTools
protocol. Used by scripts/profile_screenshot.sh.

    python scripts/cdp_screenshot.py URL OUT.png WAIT_SECONDS
"""
import base64
import json
import subprocess
import sys
import time
import urllib.request

import websocket  # websocket-client

PORT = 9333


def main(url: str, out: str, wait_s: float) -> None:
    chrome = subprocess.Popen(
        ["chromium", "--headless=new", "--no-sandbox", "--enable-unsafe-swiftshader",
         "--hide-scrollbars", "--window-size=1600,900", f"--remote-debugging-port={PORT}",
         "--remote-allow-origins=*", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        tabs = None
        for _ in range(100):  # Chromium starting: poll its endpoint for 20 s at most
            try:
                tabs = json.load(urllib.request.urlopen(f"http://127.0.0.1:{PORT}/json"))
                break
            except OSError:
                time.sleep(0.2)
        if tabs is None:
            raise SystemExit("chromium did not start")
        tab = next(t for t in tabs if t["type"] == "page")
        socket = websocket.create_connection(tab["webSocketDebuggerUrl"])
        next_id = iter(range(1, 1 << 30))

        def call(method, **params):
            request_id = next(next_id)
            socket.send(json.dumps({"id": request_id, "method": method, "params": params}))
            while True:
                message = json.loads(socket.recv())
                if message.get("id") == request_id:
                    return message.get("result", {})

        call("Emulation.setDeviceMetricsOverride", width=1600, height=900, deviceScaleFactor=1,
             mobile=False)
        call("Page.navigate", url=url)
        time.sleep(wait_s)  # the page loads and renders its data asynchronously
        with open(out, "wb") as f:
            f.write(base64.b64decode(call("Page.captureScreenshot", format="png")["data"]))
    finally:
        chrome.kill()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
