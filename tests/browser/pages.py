"""The card page as a person uses it: open a chat, send a message, read and answer cards."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from tests.browser.chromium import INSTALL_HINT

try:
    from playwright.sync_api import BrowserContext, Locator, Page, Request, expect
except ImportError as exc:  # fail the collection loudly, with the way to fix it
    raise ImportError(INSTALL_HINT) from exc

SCREENSHOTS: Final = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
# A phone's width: every pictured state is also pictured and checked at it.
NARROW: Final = {"width": 360, "height": 740}
# axe-core, from the npm packages `./dev setup` installs (package.json pins it).
AXE: Final = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
AXE_RUN: Final = """async () => {
  const found = await axe.run(document, {
    runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] },
    resultTypes: ["violations"],
  });
  return found.violations.map((v) => ({
    id: v.id,
    targets: v.nodes.map((n) => n.target.join(" ")),
  }));
}"""

# Every control on the page that has no accessible name (label, aria-label or text).
UNLABELLED_JS: Final = """() =>
  [...document.querySelectorAll("button, input, textarea, select, a")]
    .filter((el) => el.getClientRects().length)
    .filter((el) => {
      const labels = el.labels ? [...el.labels].map((l) => l.textContent).join("") : "";
      const text = el.matches("button, a") ? el.textContent : "";
      const name = el.getAttribute("aria-label") || labels || text;
      return !(name || "").trim();
    })
    .map((el) => el.outerHTML)"""

# Visible text whose contrast against its backdrop is under 4.5:1 (WCAG AA, normal text).
LOW_CONTRAST_JS: Final = """() => {
  const rgb = (s) => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => [r, g, b]
    .map((c) => (c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4)
    .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  const backdrop = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const el of document.querySelectorAll("body *")) {
    const text = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!text || !el.getClientRects().length || el.closest(":disabled")) continue;
    const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(backdrop(el))].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const what = el.textContent.trim().slice(0, 30);
    if (ratio < 4.5) low.push(`${el.tagName} "${what}" ${ratio.toFixed(2)}`);
  }
  return low;
}"""


class ChatPage:
    """One tab showing one chat, with the page errors and answers it sent recorded."""

    def __init__(self, page: Page, url: str, chat: str) -> None:
        self.page = page
        self.url = url
        self.chat = chat
        self.errors: list[Any] = []
        self.resumes: list[Request] = []
        page.on("pageerror", lambda error: self.errors.append(error))
        page.on("request", self._record)

    @classmethod
    def open(cls, context: BrowserContext, url: str, chat: str, user: str) -> ChatPage:
        """Open `chat` signed in (locally) as `user`, a reporter."""
        tab = cls(context.new_page(), url, chat)
        tab.page.goto(f"{url}/?chat={chat}&user={user}&groups=reporter")
        tab.wait_ready()
        return tab

    def _record(self, request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/resume"):
            self.resumes.append(request)

    def wait_ready(self) -> None:
        expect(self.page.locator("body[data-ready]")).to_be_attached()
        assert not self.errors, self.errors

    def reload(self) -> None:
        self.page.reload()
        self.wait_ready()

    def send(self, text: str) -> None:
        prompt = self.page.get_by_label("Message to the agent")
        prompt.fill(text)
        prompt.press("Enter")

    @property
    def card(self) -> Locator:
        """The latest card (an answered one moves into the thread)."""
        return self.page.locator(".card").last

    def button(self, name: str) -> Locator:
        return self.card.get_by_role("button", name=name, exact=True)

    def outcome(self) -> Locator:
        return self.card.locator(".outcome")

    def agent_says(self) -> Locator:
        return self.page.locator(".msg.agent").last

    def approvals(self) -> Locator:
        return self.page.locator("#approvals")

    def focused(self) -> str:
        """What has keyboard focus: a card, or a control's accessible text."""
        return str(
            self.page.evaluate(
                """() => {
                  const el = document.activeElement;
                  if (el.classList.contains("card")) return "card";
                  return el.getAttribute("aria-label") || el.textContent.trim() || el.id;
                }"""
            )
        )

    def unlabelled(self) -> list[str]:
        return list(self.page.evaluate(UNLABELLED_JS))

    def low_contrast(self) -> list[str]:
        return list(self.page.evaluate(LOW_CONTRAST_JS))

    def screenshot(self, name: str) -> None:
        """Keep pictures of the page as test artifacts (git-ignored): as it is, and at a
        phone's 360 px when it is wider; each width checked with axe-core first, so every
        pictured state has no violation at either."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        size = self.page.viewport_size
        widths = [(name, size)]
        if size is not None and size["width"] > NARROW["width"]:
            widths.append((f"{name}-360", NARROW))
        for picture, viewport in widths:
            if viewport is not None:
                self.page.set_viewport_size(viewport)
            found = self.accessibility_violations()
            assert found == [], f"{picture}: {found}"
            self.page.screenshot(path=str(SCREENSHOTS / f"{picture}.png"), full_page=True)
        if size is not None:
            self.page.set_viewport_size(size)

    def accessibility_violations(self) -> list[str]:
        """axe-core's WCAG 2.x A and AA findings on the page as it stands: rule, nodes."""
        if not self.page.evaluate("() => typeof window.axe === 'object'"):
            self.page.add_script_tag(path=str(AXE))
        results = self.page.evaluate(AXE_RUN)
        return [f"{v['id']}: {', '.join(v['targets'])}" for v in results]
