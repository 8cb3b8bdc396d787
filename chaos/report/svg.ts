// Hand-written SVG charts for the report: a line chart (leakage against sync interval or latency) and a
// timeline (admissions per region over time, faults shaded). No chart library; plain, readable markup.

export interface Series {
  name: string;
  points: ReadonlyArray<readonly [number, number]>;
  color: string;
  dashed?: boolean;
}

export interface LineChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly Series[];
  /** Logarithmic x axis (sync intervals span 50 ms to 5 s). */
  xLog?: boolean;
  /** Tick values on x; the points' x values when omitted. */
  xTicks?: readonly number[];
  /** Horizontal reference lines, e.g. a budget. */
  references?: ReadonlyArray<{ y: number; label: string; color: string }>;
}

export interface Shade {
  fromMs: number;
  toMs: number;
  label: string;
}

export interface TimelineSpec {
  title: string;
  binMs: number;
  series: readonly Series[];
  shades: readonly Shade[];
  yLabel: string;
  references?: ReadonlyArray<{ y: number; label: string; color: string }>;
}

export const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#17becf'];

const WIDTH = 720;
const HEIGHT = 360;
const MARGIN = { left: 64, right: 190, top: 36, bottom: 48 };

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function niceMax(value: number): number {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

function formatNumber(value: number): string {
  if (value >= 1000 && value % 1000 === 0) return `${value / 1000}k`;
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

interface Frame {
  x: (value: number) => number;
  y: (value: number) => number;
  parts: string[];
}

function frame(title: string, xLabel: string, yLabel: string, yMax: number, x: (value: number) => number): Frame {
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const y = (value: number) => MARGIN.top + plotHeight - (value / yMax) * plotHeight;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" ` +
      `font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${WIDTH / 2 - MARGIN.right / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="${MARGIN.left + (WIDTH - MARGIN.left - MARGIN.right) / 2}" y="${HEIGHT - 10}" ` +
      `text-anchor="middle">${escapeXml(xLabel)}</text>`,
    `<text transform="translate(16 ${MARGIN.top + plotHeight / 2}) rotate(-90)" text-anchor="middle">${escapeXml(yLabel)}</text>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const value = (yMax * i) / 4;
    parts.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(value).toFixed(1)}" y2="${y(value).toFixed(1)}" stroke="#ddd"/>`,
      `<text x="${MARGIN.left - 6}" y="${(y(value) + 4).toFixed(1)}" text-anchor="end">${formatNumber(value)}</text>`,
    );
  }
  parts.push(`<line x1="${MARGIN.left}" x2="${MARGIN.left}" y1="${MARGIN.top}" y2="${HEIGHT - MARGIN.bottom}" stroke="#333"/>`);
  parts.push(
    `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${HEIGHT - MARGIN.bottom}" y2="${HEIGHT - MARGIN.bottom}" stroke="#333"/>`,
  );
  return { x, y, parts };
}

function legend(parts: string[], entries: ReadonlyArray<{ name: string; color: string; dashed?: boolean; box?: boolean }>): void {
  entries.forEach((entry, i) => {
    const top = MARGIN.top + 8 + i * 18;
    const left = WIDTH - MARGIN.right + 14;
    parts.push(
      entry.box
        ? `<rect x="${left}" y="${top - 6}" width="20" height="12" fill="${entry.color}" fill-opacity="0.18"/>`
        : `<line x1="${left}" x2="${left + 20}" y1="${top}" y2="${top}" stroke="${entry.color}" ` +
            `stroke-width="2"${entry.dashed ? ' stroke-dasharray="5 3"' : ''}/>`,
      `<text x="${left + 26}" y="${top + 4}">${escapeXml(entry.name)}</text>`,
    );
  });
}

function polyline(points: ReadonlyArray<readonly [number, number]>, f: Frame, series: Series, markers: boolean): string {
  const path = points.map(([px, py]) => `${f.x(px).toFixed(1)},${f.y(py).toFixed(1)}`).join(' ');
  const line =
    `<polyline points="${path}" fill="none" stroke="${series.color}" ` +
    `stroke-width="2"${series.dashed ? ' stroke-dasharray="5 3"' : ''}/>`;
  if (!markers) return line;
  return (
    line + points.map(([px, py]) => `<circle cx="${f.x(px).toFixed(1)}" cy="${f.y(py).toFixed(1)}" r="3" fill="${series.color}"/>`).join('')
  );
}

function drawReferences(f: Frame, references: LineChartSpec['references']): void {
  for (const reference of references ?? []) {
    f.parts.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${f.y(reference.y).toFixed(1)}" y2="${f.y(reference.y).toFixed(1)}" ` +
        `stroke="${reference.color}" stroke-dasharray="2 3"/>`,
      `<text x="${WIDTH - MARGIN.right - 4}" y="${(f.y(reference.y) - 4).toFixed(1)}" text-anchor="end" ` +
        `fill="${reference.color}">${escapeXml(reference.label)}</text>`,
    );
  }
}

export function lineChart(spec: LineChartSpec): string {
  const xs = spec.xTicks ?? [...new Set(spec.series.flatMap((s) => s.points.map(([x]) => x)))].sort((a, b) => a - b);
  const ys = [...spec.series.flatMap((s) => s.points.map(([, y]) => y)), ...(spec.references ?? []).map((r) => r.y)];
  const yMax = niceMax(Math.max(0, ...ys) * 1.1);
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const transform = (value: number) => (spec.xLog ? Math.log10(Math.max(value, 1e-9)) : value);
  const lo = transform(Math.min(...xs));
  const hi = transform(Math.max(...xs));
  const x = (value: number) => MARGIN.left + 20 + (hi === lo ? plotWidth / 2 : ((transform(value) - lo) / (hi - lo)) * (plotWidth - 40));
  const f = frame(spec.title, spec.xLabel, spec.yLabel, yMax, x);
  for (const tick of xs) {
    f.parts.push(`<text x="${x(tick).toFixed(1)}" y="${HEIGHT - MARGIN.bottom + 16}" text-anchor="middle">${formatNumber(tick)}</text>`);
  }
  drawReferences(f, spec.references);
  for (const series of spec.series) f.parts.push(polyline(series.points, f, series, true));
  legend(f.parts, spec.series);
  f.parts.push('</svg>');
  return f.parts.join('\n');
}

export function timelineChart(spec: TimelineSpec): string {
  const bins = Math.max(1, ...spec.series.map((s) => s.points.length));
  const durationMs = bins * spec.binMs;
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const x = (ms: number) => MARGIN.left + (ms / durationMs) * plotWidth;
  const yMax = niceMax(
    Math.max(1, ...spec.series.flatMap((s) => s.points.map(([, y]) => y)), ...(spec.references ?? []).map((r) => r.y)) * 1.1,
  );
  const f = frame(spec.title, 'seconds since the traffic started', spec.yLabel, yMax, x);
  drawReferences(f, spec.references);
  for (const shade of spec.shades) {
    const left = x(shade.fromMs);
    f.parts.push(
      `<rect x="${left.toFixed(1)}" y="${MARGIN.top}" width="${Math.max(1, x(shade.toMs) - left).toFixed(1)}" ` +
        `height="${HEIGHT - MARGIN.top - MARGIN.bottom}" fill="#f4a582" fill-opacity="0.3"/>`,
      `<text x="${(left + 4).toFixed(1)}" y="${MARGIN.top + 14}" fill="#b2182b">${escapeXml(shade.label)}</text>`,
    );
  }
  const step = durationMs > 20_000 ? 5_000 : durationMs > 8_000 ? 2_000 : 1_000;
  for (let ms = 0; ms <= durationMs; ms += step) {
    f.parts.push(`<text x="${x(ms).toFixed(1)}" y="${HEIGHT - MARGIN.bottom + 16}" text-anchor="middle">${ms / 1000}</text>`);
  }
  for (const series of spec.series) {
    // Each bin's count is drawn at the bin's middle.
    const points = series.points.map(([index, count]) => [(index + 0.5) * spec.binMs, count] as const);
    f.parts.push(polyline(points, f, series, false));
  }
  legend(f.parts, [...spec.series, ...(spec.shades.length ? [{ name: 'fault active', color: '#f4a582', box: true }] : [])]);
  f.parts.push('</svg>');
  return f.parts.join('\n');
}
