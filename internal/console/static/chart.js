// A line chart of one of the registry's series (values at a fixed step up to an end, null
// where no sample was taken), drawn as SVG in the page's own pixels: the y axis with its
// scale, times along the bottom, a point per sample, and a readout of one sample that
// follows the pointer, or the arrow keys while the chart has focus. Before the first sample
// it says what will appear there. Values go into the page as text and SVG attributes only.

import { el, svg } from './dom.js';
import { localMoment } from './time.js';

// HEIGHT is the drawn height in CSS pixels; the width is the box's. MARGIN leaves room for
// the y axis' values on the left and the times below.
const HEIGHT = 170;
const MARGIN = { left: 44, right: 14, top: 12, bottom: 26 };

// scale returns the top of the y axis and the step between its values for counts up to
// max: a whole step of 1, 2 or 5 times a power of ten, about four steps in all.
export function scale(max) {
  const rough = Math.max(1, max) / 4;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = Math.max(1, Math.round([1, 2, 5, 10].map((f) => f * power).find((s) => s >= rough)));
  return { top: Math.max(step, Math.ceil(max / step) * step), step };
}

// duration names a number of seconds the way the charts' notes use it.
function duration(s) {
  if (s === 60) return 'a minute';
  if (s === 3600) return 'an hour';
  if (s > 86400 && s % 86400 === 0) return `${s / 86400} days`;
  if (s % 3600 === 0) return `${s / 3600} hours`;
  if (s % 60 === 0) return `${s / 60} minutes`;
  return `${s} s`;
}

const DAY = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });
const HOUR = new Intl.DateTimeFormat(undefined, { weekday: 'short', hour: 'numeric', minute: '2-digit' });

export class LineChart {
  // box is the element the chart fills; unit names what is counted, for the readout.
  constructor(box, unit) {
    this.box = box;
    this.unit = unit;
    this.series = null;
    this.label = '';
    // at is the time of the sample the readout shows, kept across refreshes; hover and
    // focused say why it is shown.
    this.at = null;
    this.hover = false;
    this.focused = false;
    this.caption = el('p', { class: 'axis' });
    this.svg = svg('svg', { class: 'chart-svg', role: 'img', height: HEIGHT });
    this.readout = el('p', { class: 'chart-readout', id: box.id + '-readout', hidden: true });
    this.readout.setAttribute('aria-live', 'polite');
    this.svg.setAttribute('aria-describedby', this.readout.id);
    this.empty = el('p', { class: 'chart-empty', hidden: true });
    this.plot = el('div', { class: 'chart-plot' }, this.svg, this.readout, this.empty);
    box.replaceChildren(this.caption, this.plot);

    this.svg.addEventListener('pointermove', (ev) => {
      this.hover = true;
      this.pick(this.indexAt(ev.clientX - this.svg.getBoundingClientRect().left));
    });
    this.svg.addEventListener('pointerleave', () => {
      this.hover = false;
      if (!this.focused) this.hideReadout();
    });
    this.svg.addEventListener('focus', () => {
      this.focused = true;
      const p = this.present();
      this.pick(this.indexOf(this.at) ?? p[p.length - 1]);
    });
    this.svg.addEventListener('blur', () => {
      this.focused = false;
      if (!this.hover) this.hideReadout();
    });
    this.svg.addEventListener('keydown', (ev) => this.key(ev));
    // Drawn in the box's pixels, so drawn again when the box changes width.
    new ResizeObserver(() => {
      if (Math.round(this.plot.clientWidth) !== this.width) this.draw();
    }).observe(this.plot);
  }

  // set shows series under label, the chart's accessible name; the readout stays on the
  // sample it showed.
  set(series, label) {
    if (label !== this.label) this.at = null;
    this.series = series;
    this.label = label;
    this.draw();
  }

  present() {
    const out = [];
    this.series.values.forEach((v, i) => { if (v !== null) out.push(i); });
    return out;
  }

  timeOf(i) {
    const s = this.series;
    return Date.parse(s.end) - (s.values.length - 1 - i) * s.step * 1000;
  }

  // indexOf is the sample nearest the time at, or undefined when there is none.
  indexOf(at) {
    if (at === null) return undefined;
    const s = this.series;
    const i = Math.round((at - this.timeOf(0)) / (s.step * 1000));
    return this.nearest(Math.min(s.values.length - 1, Math.max(0, i)));
  }

  // nearest is the sampled step closest to step i.
  nearest(i) {
    const v = this.series.values;
    for (let d = 0; d < v.length; d++) {
      if (i - d >= 0 && v[i - d] !== null) return i - d;
      if (i + d < v.length && v[i + d] !== null) return i + d;
    }
    return undefined;
  }

  indexAt(px) {
    const n = this.series.values.length;
    const f = (px - MARGIN.left) / (this.width - MARGIN.left - MARGIN.right);
    return this.nearest(Math.min(n - 1, Math.max(0, Math.round(f * (n - 1)))));
  }

  key(ev) {
    const p = this.present();
    const at = p.indexOf(this.indexOf(this.at));
    const to = { ArrowLeft: at - 1, ArrowDown: at - 1, ArrowRight: at + 1, ArrowUp: at + 1, Home: 0, End: p.length - 1 }[ev.key];
    if (to === undefined || !p.length) return;
    ev.preventDefault();
    this.pick(p[Math.min(p.length - 1, Math.max(0, to))]);
  }

  x(i) {
    const n = this.series.values.length;
    return MARGIN.left + (n > 1 ? i / (n - 1) : 1) * (this.width - MARGIN.left - MARGIN.right);
  }

  y(v) {
    return MARGIN.top + (1 - v / this.top) * (HEIGHT - MARGIN.top - MARGIN.bottom);
  }

  draw() {
    const s = this.series;
    const width = Math.round(this.plot.clientWidth);
    // A hidden box has no width: it is drawn when it is shown.
    if (!s || !width) return;
    this.width = width;
    const p = this.present();
    const values = p.map((i) => s.values[i]);
    const latest = values[values.length - 1];
    const highest = Math.max(0, ...values);
    this.svg.setAttribute('aria-label', p.length
      ? `${this.label}: ${p.length} samples, latest ${latest}, highest ${Math.max(1, highest)}`
      : `${this.label}: no samples yet`);
    const span = duration(s.step * s.values.length);
    const every = 'every ' + duration(s.step).replace(/^an? /, '');
    if (!p.length) {
      this.caption.textContent = '';
      this.empty.textContent = `No samples yet. The registry takes one ${every}: the first point appears here within ${duration(s.step)}, and the line fills in over ${span}.`;
      this.empty.hidden = false;
      this.svg.replaceChildren();
      this.svg.removeAttribute('tabindex');
      this.svg.setAttribute('hidden', '');
      this.hideReadout();
      this.box.dataset.width = String(width);
      return;
    }
    this.empty.hidden = true;
    this.svg.removeAttribute('hidden');
    this.svg.setAttribute('tabindex', '0');
    this.caption.textContent = `latest ${latest.toLocaleString()} · highest ${highest.toLocaleString()} · ` +
      `${p.length} sample${p.length === 1 ? '' : 's'}, taken ${every}`;

    const { top, step } = scale(highest);
    this.top = top;
    this.svg.setAttribute('viewBox', `0 0 ${width} ${HEIGHT}`);
    this.svg.setAttribute('width', width);
    const parts = [svg('rect', { class: 'frame', x: 0.5, y: 0.5, width: width - 1, height: HEIGHT - 1, rx: 6 })];
    for (let v = 0; v <= top; v += step) {
      const y = this.y(v).toFixed(1);
      parts.push(svg('line', { class: 'grid', x1: MARGIN.left, x2: width - MARGIN.right, y1: y, y2: y }));
      parts.push(svg('text', { class: 'y-label', x: MARGIN.left - 6, y, 'text-anchor': 'end', 'dominant-baseline': 'middle' }));
      parts[parts.length - 1].textContent = v.toLocaleString();
    }
    const n = s.values.length;
    const days = s.step * n > 2 * 86400;
    for (const [i, anchor] of [[0, 'start'], [Math.floor((n - 1) / 2), 'middle'], [n - 1, 'end']]) {
      const t = svg('text', { class: 'x-label', x: this.x(i).toFixed(1), y: HEIGHT - 6, 'text-anchor': anchor });
      t.textContent = (days ? DAY : HOUR).format(this.timeOf(i));
      parts.push(t);
    }
    let d = '';
    let pen = false;
    s.values.forEach((v, i) => {
      if (v === null) {
        pen = false;
        return;
      }
      d += `${pen ? 'L' : 'M'}${this.x(i).toFixed(1)} ${this.y(v).toFixed(1)}`;
      pen = true;
    });
    parts.push(svg('path', { d, class: 'line' }));
    // Points shrink where they would crowd each other.
    const r = p.length * 6 > width ? 1.2 : 3;
    const points = svg('g', { class: 'points' });
    for (const i of p) points.append(svg('circle', { cx: this.x(i).toFixed(1), cy: this.y(s.values[i]).toFixed(1), r }));
    parts.push(points);
    this.guide = svg('line', { class: 'guide', y1: MARGIN.top, y2: HEIGHT - MARGIN.bottom, visibility: 'hidden' });
    this.mark = svg('circle', { class: 'mark', r: 5, visibility: 'hidden' });
    parts.push(this.guide, this.mark);
    this.svg.replaceChildren(...parts);
    this.box.dataset.width = String(width);
    if (this.hover || this.focused) this.pick(this.indexOf(this.at) ?? p[p.length - 1]);
  }

  // pick shows the readout of sample i, beside its point.
  pick(i) {
    if (i === undefined || !this.width) return;
    const v = this.series.values[i];
    this.at = this.timeOf(i);
    const x = this.x(i);
    const y = this.y(v);
    for (const [k, val] of [['x1', x], ['x2', x]]) this.guide.setAttribute(k, val.toFixed(1));
    this.mark.setAttribute('cx', x.toFixed(1));
    this.mark.setAttribute('cy', y.toFixed(1));
    this.guide.setAttribute('visibility', 'visible');
    this.mark.setAttribute('visibility', 'visible');
    this.readout.textContent = `${localMoment(this.at)}: ${v.toLocaleString()} ${this.unit}`;
    this.readout.hidden = false;
    // Placed by the object model (allowed by the page's policy, unlike a style attribute):
    // above the point, or below it near the top, and always inside the box. The widths are
    // the laid-out ones, fractions of a pixel included: offsetWidth and clientWidth round,
    // and a readout against the right edge would then stick out by the rounding.
    const w = this.readout.getBoundingClientRect().width;
    const h = this.readout.offsetHeight;
    const room = this.plot.getBoundingClientRect().width;
    this.readout.style.left = `${Math.max(0, Math.min(room - w, x - w / 2))}px`;
    this.readout.style.top = `${y - h - 10 < 0 ? y + 10 : y - h - 10}px`;
  }

  hideReadout() {
    this.readout.hidden = true;
    if (this.guide) {
      this.guide.setAttribute('visibility', 'hidden');
      this.mark.setAttribute('visibility', 'hidden');
    }
  }
}
