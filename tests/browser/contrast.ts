// WCAG contrast of what the dashboard draws, measured from computed styles in
// the page (light and dark themes alike: the test switches colorScheme).
import type { Page } from 'playwright-core';

/**
 * Every visible button, link, input, select and textarea (`text`: every
 * element with text of its own too): its text colour against the background
 * it is drawn on (ancestors' backgrounds composited), as the WCAG contrast
 * ratio. Runs in the page.
 */
export function contrasts(page: Page, { text = false } = {}) {
  return page.evaluate((text) => {
    type RGBA = [number, number, number, number];
    const parse = (c: string): RGBA => {
      const m = c.match(/rgba?\(([^)]+)\)/);
      if (!m) return [0, 0, 0, 0];
      const p = m[1]
        .split(/[,\s/]+/)
        .filter(Boolean)
        .map(Number);
      return [p[0], p[1], p[2], p[3] ?? 1];
    };
    const over = (top: RGBA, under: RGBA): RGBA => {
      const a = top[3] + under[3] * (1 - top[3]);
      if (a === 0) return [0, 0, 0, 0];
      const mix = (i: number) => (top[i] * top[3] + under[i] * under[3] * (1 - top[3])) / a;
      return [mix(0), mix(1), mix(2), a];
    };
    const background = (el: Element): RGBA => {
      const layers: RGBA[] = [];
      for (let e: Element | null = el; e; e = e.parentElement) {
        const c = parse(getComputedStyle(e).backgroundColor);
        if (c[3] > 0) layers.push(c);
        if (c[3] >= 1) break;
      }
      let bg: RGBA = [255, 255, 255, 1]; // the canvas under everything
      for (const layer of layers.reverse()) bg = over(layer, bg);
      return bg;
    };
    const luminance = ([r, g, b]: RGBA) => {
      const ch = (v: number) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
      return 0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(b);
    };
    const out: Array<{ what: string; ratio: number; fg: string; bg: string }> = [];
    const ownText = (el: Element) => [...el.childNodes].some((c) => c.nodeType === Node.TEXT_NODE && c.textContent!.trim());
    const elements = [...document.querySelectorAll('button, a, input, select, textarea')];
    if (text)
      for (const el of document.querySelectorAll('body *:not(script):not(style):not(option)')) if (ownText(el) && !elements.includes(el)) elements.push(el);
    for (const el of elements) {
      if (el.closest('[inert], svg')) continue; // not shown (a closed drawer), or a chart's own labels
      const r = el.getBoundingClientRect();
      const style = getComputedStyle(el);
      if (r.width === 0 || r.height === 0 || style.visibility === 'hidden') continue;
      let opacity = 1;
      for (let e: Element | null = el; e; e = e.parentElement) opacity *= Number(getComputedStyle(e).opacity);
      const bg = background(el);
      const fgRaw = parse(style.color);
      const fg = over([fgRaw[0], fgRaw[1], fgRaw[2], fgRaw[3] * opacity], bg);
      const [l1, l2] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
      const label = el.getAttribute('aria-label') || (el as HTMLElement).innerText?.trim().slice(0, 30) || el.tagName;
      out.push({
        what: `${el.tagName.toLowerCase()} "${label}"`,
        ratio: (l1 + 0.05) / (l2 + 0.05),
        fg: style.color,
        bg: `rgb(${bg.slice(0, 3).map(Math.round).join(',')})`,
      });
    }
    return out;
  }, text);
}
