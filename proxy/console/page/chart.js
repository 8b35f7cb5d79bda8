// A line chart on a canvas: a few series over the same times, the y axis from 0 to the largest
// value, the time axis the last minutes. Small on purpose: the console needs nothing more.

/**
 * @param {HTMLCanvasElement} canvas
 * @param {number[]} times  milliseconds since the epoch, oldest first
 * @param {{label: string, color: string, values: (number|null)[]}[]} series
 * @param {(v: number) => string} format  the y axis' labels
 */
export function drawChart(canvas, times, series, format) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || canvas.width;
  const height = canvas.clientHeight || canvas.height;
  if (canvas.width !== width * ratio || canvas.height !== height * ratio) {
    canvas.width = width * ratio;
    canvas.height = height * ratio;
  }
  const g = canvas.getContext('2d');
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, height);
  const style = getComputedStyle(canvas);
  const ink = style.color;
  const left = 52;
  const bottom = height - 18;
  const top = 16;
  const right = width - 8;

  const all = series.flatMap((s) => s.values.filter((v) => v !== null));
  const max = niceCeiling(Math.max(0, ...all));
  const x0 = times.length > 0 ? times[0] : 0;
  const span = Math.max(times.length > 0 ? times[times.length - 1] - x0 : 1, 1);
  const x = (t) => left + ((t - x0) / span) * (right - left);
  const y = (v) => bottom - (max === 0 ? 0 : (v / max) * (bottom - top));

  g.font = '11px system-ui, sans-serif';
  g.fillStyle = ink;
  g.strokeStyle = ink;
  g.globalAlpha = 0.25;
  for (const v of [0, max / 2, max]) {
    g.beginPath();
    g.moveTo(left, y(v));
    g.lineTo(right, y(v));
    g.stroke();
  }
  g.globalAlpha = 1;
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  for (const v of [0, max / 2, max]) g.fillText(format(v), left - 6, y(v));
  g.textBaseline = 'alphabetic';
  g.textAlign = 'left';
  g.fillText(times.length > 1 ? `${Math.round(span / 1000)} s ago` : 'waiting for samples', left, height - 4);
  g.textAlign = 'right';
  g.fillText('now', right, height - 4);

  let legend = left;
  g.textAlign = 'left';
  for (const s of series) {
    g.fillStyle = s.color;
    g.fillRect(legend, 4, 10, 3);
    g.fillStyle = ink;
    g.fillText(s.label, legend + 14, 10);
    legend += g.measureText(s.label).width + 30;

    g.strokeStyle = s.color;
    g.lineWidth = 1.5;
    g.beginPath();
    let drawing = false;
    s.values.forEach((v, i) => {
      if (v === null) return void (drawing = false);
      if (drawing) g.lineTo(x(times[i]), y(v));
      else g.moveTo(x(times[i]), y(v));
      drawing = true;
    });
    g.stroke();
  }
}

/** 1, 2 or 5 times a power of ten, at or above `v` (0 stays 0). */
function niceCeiling(v) {
  if (v <= 0) return 0;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
