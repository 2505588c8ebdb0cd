// The delivery chart: delivered, failed and retried notifications per hour
// (from the stats endpoint), drawn as inline SVG with DOM calls, and the
// attempt latency percentiles.

import { h, s } from './dom.js';

const SERIES = [
  ['delivered', 'Delivered'],
  ['failed', 'Failed'],
  ['retried', 'Retried'],
];

function hourLabel(iso) {
  const d = new Date(iso);
  return `${String(d.getHours()).padStart(2, '0')}:00`;
}

/**
 * A figure with the chart, its legend and the percentiles; `width` is the
 * room it has in CSS pixels, so that its text stays readable on a phone.
 */
export function chart(stats, width = 720) {
  const buckets = stats.buckets || [];
  width = Math.max(300, Math.min(1000, Math.round(width)));
  const height = width < 500 ? 170 : 220;
  const left = 36;
  const bottom = 28;
  const top = 10;
  const plotW = width - left - 8;
  const plotH = height - top - bottom;
  const max = Math.max(1, ...buckets.flatMap((b) => SERIES.map(([k]) => b[k] || 0)));
  const step = niceStep(max);
  const yMax = Math.ceil(max / step) * step;
  const slot = plotW / Math.max(1, buckets.length);
  const barW = Math.max(1, Math.min(10, (slot - 2) / SERIES.length));
  const y = (v) => top + plotH - (v / yMax) * plotH;

  const totals = stats.totals || {};
  const svg = s('svg', {
    viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img',
    'aria-label': `Notifications per hour: ${totals.delivered || 0} delivered, ${totals.failed || 0} failed, ${totals.retried || 0} retried`,
  });
  for (let v = 0; v <= yMax; v += step) {
    svg.append(
      s('line', { x1: left, x2: width - 8, y1: y(v), y2: y(v), class: 'grid' }),
      s('text', { x: left - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, String(v)));
  }
  const every = Math.max(1, Math.ceil(buckets.length / Math.max(3, Math.floor(width / 90))));
  buckets.forEach((b, i) => {
    const x0 = left + i * slot + (slot - barW * SERIES.length) / 2;
    SERIES.forEach(([key, label], j) => {
      const value = b[key] || 0;
      if (value > 0) {
        svg.append(s('rect', {
          x: x0 + j * barW, y: y(value), width: Math.max(1, barW - 1), height: y(0) - y(value), class: `bar bar-${key}`,
        }, s('title', {}, `${hourLabel(b.start)}: ${value} ${label.toLowerCase()}`)));
      }
    });
    if (i % every === 0) {
      svg.append(s('text', { x: left + i * slot + slot / 2, y: height - 8, class: 'axis', 'text-anchor': 'middle' }, hourLabel(b.start)));
    }
  });
  svg.append(s('line', { x1: left, x2: width - 8, y1: y(0), y2: y(0), class: 'baseline' }));

  const legend = h('ul', { class: 'legend' }, SERIES.map(([key, label]) => h('li', {},
    h('span', { class: `swatch bar-${key}`, 'aria-hidden': 'true' }), `${label} ${totals[key] || 0}`)),
  h('li', {}, `Pending ${totals.pending || 0}`));

  const d = stats.durationMs || {};
  const ms = (v) => (v === null || v === undefined ? '—' : `${v} ms`);
  const latency = h('dl', { class: 'latency' },
    h('div', {}, h('dt', {}, 'p50 latency'), h('dd', {}, ms(d.p50))),
    h('div', {}, h('dt', {}, 'p99 latency'), h('dd', {}, ms(d.p99))),
    h('div', {}, h('dt', {}, 'attempts measured'), h('dd', {}, String(d.count || 0))));

  return h('figure', { class: 'card stats' },
    h('figcaption', {}, h('h2', {}, 'Last 24 hours'), legend),
    svg,
    latency);
}

function niceStep(max) {
  const raw = max / 4;
  const mag = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  for (const m of [1, 2, 5, 10]) if (m * mag >= raw) return m * mag;
  return 10 * mag;
}
