// BENCHMARKS.svg: grouped bar charts of ops/s, one panel per shape, one group per test, one bar
// per target. Hand-written SVG so the benchmark needs no charting dependency; GitHub renders it.

export interface ChartPanel {
  title: string;
  groups: string[];
  /** values[series][group]; null draws no bar (target unavailable or failed). */
  values: (number | null)[][];
}

export interface Chart {
  title: string;
  series: string[];
  panels: ChartPanel[];
}

const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#b07aa1', '#76b7b2', '#edc948'];
const WIDTH = 960;
const MARGIN_LEFT = 80;
const MARGIN_RIGHT = 20;
const PANEL_HEIGHT = 250;
const PLOT_TOP = 30;
const PLOT_HEIGHT = 170;
const HEADER_HEIGHT = 70;

function escapeXml(s: string): string {
  return s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c] ?? c);
}

/** Axis top and tick step: 1, 2 or 5 times a power of ten, about five ticks. */
function niceScale(max: number): { top: number; step: number } {
  if (!(max > 0)) return { top: 1, step: 0.2 };
  const rough = max / 5;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power;
  return { top: Math.ceil(max / step) * step, step };
}

function compact(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(n % 1e6 === 0 ? 0 : 1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(n % 1e3 === 0 ? 0 : 1)}k`;
  return String(Math.round(n));
}

function panelSvg(panel: ChartPanel, series: readonly string[], y0: number): string[] {
  const out: string[] = [];
  const plotLeft = MARGIN_LEFT;
  const plotWidth = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
  const top = y0 + PLOT_TOP;
  const bottom = top + PLOT_HEIGHT;
  const all = panel.values.flat().filter((v): v is number => v !== null);
  const { top: axisTop, step } = niceScale(all.length === 0 ? 0 : Math.max(...all));
  const yOf = (v: number): number => bottom - (v / axisTop) * PLOT_HEIGHT;

  out.push(`<text x="${plotLeft}" y="${y0 + 18}" class="panel">${escapeXml(panel.title)}</text>`);
  for (let v = 0; v <= axisTop + step / 2; v += step) {
    const y = yOf(v).toFixed(1);
    out.push(`<line x1="${plotLeft}" x2="${plotLeft + plotWidth}" y1="${y}" y2="${y}" class="grid"/>`);
    out.push(`<text x="${plotLeft - 6}" y="${y}" class="tick" text-anchor="end" dominant-baseline="middle">${compact(v)}</text>`);
  }
  out.push(`<text x="18" y="${(top + bottom) / 2}" class="tick" text-anchor="middle" transform="rotate(-90 18 ${(top + bottom) / 2})">ops/s</text>`);

  const groupWidth = plotWidth / Math.max(1, panel.groups.length);
  const barWidth = (groupWidth * 0.8) / Math.max(1, series.length);
  panel.groups.forEach((group, g) => {
    const gx = plotLeft + g * groupWidth + groupWidth * 0.1;
    series.forEach((name, s) => {
      const v = panel.values[s]?.[g] ?? null;
      const x = gx + s * barWidth;
      if (v === null) {
        out.push(`<text x="${(x + barWidth / 2).toFixed(1)}" y="${bottom - 4}" class="na" text-anchor="middle">n/a</text>`);
        return;
      }
      const y = yOf(v);
      out.push(
        `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(1, barWidth - 2).toFixed(1)}" height="${(bottom - y).toFixed(1)}" fill="${COLORS[s % COLORS.length]}">` +
          `<title>${escapeXml(`${name}, ${group}: ${Math.round(v)} ops/s`)}</title></rect>`,
      );
    });
    out.push(`<text x="${(gx + groupWidth * 0.4).toFixed(1)}" y="${bottom + 16}" class="tick" text-anchor="middle">${escapeXml(group)}</text>`);
  });
  out.push(`<line x1="${plotLeft}" x2="${plotLeft + plotWidth}" y1="${bottom}" y2="${bottom}" class="axis"/>`);
  return out;
}

export function renderChart(chart: Chart): string {
  const height = HEADER_HEIGHT + chart.panels.length * PANEL_HEIGHT;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    '<style>.title{font-size:16px;font-weight:bold}.panel{font-size:13px;font-weight:bold}.tick{font-size:11px;fill:#444}' +
      '.legend{font-size:12px}.na{font-size:9px;fill:#999}.grid{stroke:#e5e5e5}.axis{stroke:#888}</style>',
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text x="${MARGIN_LEFT}" y="24" class="title">${escapeXml(chart.title)}</text>`,
  ];
  let lx = MARGIN_LEFT;
  chart.series.forEach((name, s) => {
    out.push(`<rect x="${lx}" y="40" width="12" height="12" fill="${COLORS[s % COLORS.length]}"/>`);
    out.push(`<text x="${lx + 16}" y="50" class="legend">${escapeXml(name)}</text>`);
    lx += 16 + name.length * 7 + 20;
  });
  chart.panels.forEach((panel, i) => out.push(...panelSvg(panel, chart.series, HEADER_HEIGHT + i * PANEL_HEIGHT)));
  out.push('</svg>', '');
  return out.join('\n');
}
