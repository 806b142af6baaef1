"""WCAG contrast of text as the browser paints it, measured from computed styles inside the page.

For each element with text of its own under a root, the page composites the backgrounds of the element and of
its ancestors (top down, alpha included) on a 1x1 canvas, paints the text colour over that, and reads both
pixels back: the canvas resolves every colour syntax the browser knows (``rgb()``, ``color(srgb ...)``,
``color-mix`` results), so the ratio is the one a reader sees. Hidden elements, disabled controls (WCAG
exempts inactive components) and text drawn fully transparent on purpose (a breakpoint's dot until hover)
are skipped.
"""

from __future__ import annotations

from typing import Any

AA = 4.5
"""WCAG 2.x level AA for normal text."""

CONTRASTS_JS = r"""
(roots) => {
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 1;
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  const pixel = (layers) => {
    ctx.globalCompositeOperation = "source-over";
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, 1, 1);
    for (const c of layers) { ctx.fillStyle = "#000000"; ctx.fillStyle = c; ctx.fillRect(0, 0, 1, 1); }
    const d = ctx.getImageData(0, 0, 1, 1).data;
    return [d[0], d[1], d[2]];
  };
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const alpha = (c) => {
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = "#000000"; ctx.fillStyle = c; ctx.fillRect(0, 0, 1, 1);
    return ctx.getImageData(0, 0, 1, 1).data[3];
  };
  const out = [];
  for (const root of roots) {
    for (const el of [root, ...root.querySelectorAll("*")]) {
      const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      if (!own || !el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true })) continue;
      if (el.closest("button:disabled, [aria-disabled='true'], select:disabled, input:disabled, svg, option")) continue;
      if (alpha(getComputedStyle(el).color) === 0) continue; // invisible on purpose (a breakpoint's dot off hover)
      const layers = [];
      for (let a = el; a; a = a.parentElement) {
        const bg = getComputedStyle(a).backgroundColor;
        if (bg && bg !== "rgba(0, 0, 0, 0)" && bg !== "transparent") layers.unshift(bg);
      }
      const back = pixel(layers);
      const fore = pixel([...layers, getComputedStyle(el).color]);
      const [hi, lo] = [lum(fore), lum(back)].sort((x, y) => y - x);
      out.push({ text: el.textContent.trim().slice(0, 40), cls: String(el.className).slice(0, 60),
                 ratio: Math.round(((hi + 0.05) / (lo + 0.05)) * 100) / 100,
                 color: getComputedStyle(el).color, back: `rgb(${back.join(",")})` });
    }
  }
  return out;
}
"""


def contrasts(locator: Any) -> list[dict[str, Any]]:
    """Every text element's contrast under the elements ``locator`` matches (see the module docstring)."""
    return list(locator.evaluate_all(CONTRASTS_JS))


def below_aa(locator: Any) -> list[dict[str, Any]]:
    """The text elements whose contrast is below :data:`AA`."""
    return [c for c in contrasts(locator) if c["ratio"] < AA]
